//! The steps an operation has done so far, unwound in reverse when a later step fails.
//! A failed undo is reported with its cause next to the original error, never swallowed.

use anyhow::Result;

type Step<'a> = (String, Box<dyn FnOnce() -> Result<()> + 'a>);

#[derive(Default)]
pub struct Undo<'a> {
    steps: Vec<Step<'a>>,
}

impl<'a> Undo<'a> {
    pub fn new() -> Self {
        Undo { steps: Vec::new() }
    }

    /// Registers how to reverse a step that has just succeeded.
    pub fn push(&mut self, what: impl Into<String>, undo: impl FnOnce() -> Result<()> + 'a) {
        self.steps.push((what.into(), Box::new(undo)));
    }

    /// The operation succeeded: keep everything.
    pub fn commit(mut self) {
        self.steps.clear();
    }

    /// Reverses every step, newest first, and returns `err` with any undo failures attached.
    pub fn unwind(mut self, err: anyhow::Error) -> anyhow::Error {
        let mut failures = Vec::new();
        while let Some((what, step)) = self.steps.pop() {
            if let Err(e) = step() {
                failures.push(format!("undo of \"{what}\" failed: {e:#}"));
            }
        }
        if failures.is_empty() {
            err
        } else {
            err.context(format!(
                "{}; run `db-branch delete` on the branch to clean up what is left",
                failures.join("; ")
            ))
        }
    }
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        // Reached with steps left only on a panic or an early `?` that skipped unwind():
        // still put things back.
        while let Some((what, step)) = self.steps.pop() {
            if let Err(e) = step() {
                eprintln!("db-branch: undo of \"{what}\" failed: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn unwinds_in_reverse_and_reports_failed_undo() {
        let log = RefCell::new(Vec::new());
        let mut u = Undo::new();
        u.push("one", || {
            log.borrow_mut().push(1);
            Ok(())
        });
        u.push("two", || {
            log.borrow_mut().push(2);
            Err(anyhow::anyhow!("disk gone"))
        });
        let e = u.unwind(anyhow::anyhow!("start failed"));
        assert_eq!(*log.borrow(), vec![2, 1]);
        let s = format!("{e:#}");
        assert!(
            s.contains("undo of \"two\" failed: disk gone") && s.contains("start failed"),
            "{s}"
        );
    }

    #[test]
    fn commit_keeps_everything() {
        let ran = RefCell::new(false);
        let mut u = Undo::new();
        u.push("x", || {
            *ran.borrow_mut() = true;
            Ok(())
        });
        u.commit();
        assert!(!*ran.borrow());
    }
}
