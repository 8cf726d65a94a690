//! `init`.

use crate::ops::init::Initialised;
use crate::printer::{bytes, Human};

impl Human for Initialised {
    fn human(&self) -> String {
        format!(
            "root:            {}\npool:            {} at {} ({} free of {})\nservice manager: {}\nserver:          {}\n",
            self.root.display(),
            self.pool.kind,
            self.pool.path.display(),
            bytes(Some(self.pool.free_bytes)),
            bytes(Some(self.pool.total_bytes)),
            self.service_manager,
            self.server_version
        )
    }
}
