-- A test-suite-like sysbench workload: many small transactions and DDL per event,
-- as an application's test suite does (create a table, fill it, change it, truncate, drop).
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
end

function event()
  local t = string.format("suite_%d_%d", sysbench.tid, math.random(1, 1000000000))
  con:query("CREATE TABLE " .. t .. " (id INT PRIMARY KEY, v VARCHAR(64), KEY v (v)) ENGINE=InnoDB")
  con:query("BEGIN")
  con:query("INSERT INTO " .. t .. " VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d')")
  con:query("COMMIT")
  con:query("UPDATE " .. t .. " SET v = 'z' WHERE id = 2")
  con:query("DELETE FROM " .. t .. " WHERE id = 3")
  con:query("TRUNCATE TABLE " .. t)
  con:query("DROP TABLE " .. t)
end

function thread_done()
  con:disconnect()
end
