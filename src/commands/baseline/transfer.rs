//! `baseline push`, `pull`, and the far side's `receive` and `send`.

use crate::cli::{BaselinePullArgs, BaselinePushArgs, BaselineReceiveArgs, BaselineSendArgs};
use crate::host::Host;
use crate::ops::transfer;
use crate::transfer::dir::Dir;
use crate::transfer::endpoint::Endpoint;
use crate::transfer::remote::Remote;
use crate::transfer::ssh::Ssh;
use crate::view::transfer::{ReceivedView, TransferReport};
use anyhow::Result;

fn remote(host: &Host, endpoint: &Endpoint) -> Result<Box<dyn Remote>> {
    Ok(match endpoint {
        Endpoint::Ssh(t) => Box::new(Ssh::new(t.clone(), &host.config.fleet)?),
        Endpoint::Dir(d) => Box::new(Dir::new(d.clone())),
    })
}

pub fn push(host: &Host, args: &BaselinePushArgs) -> Result<()> {
    let remote = remote(host, &args.dest)?;
    let done = transfer::push(host, remote.as_ref(), args.generation, args.as_files)?;
    host.printer.emit(&TransferReport(vec![done]))
}

pub fn pull(host: &Host, args: &BaselinePullArgs) -> Result<()> {
    let remote = remote(host, &args.src)?;
    let done = transfer::pull(host, remote.as_ref(), args.generation)?;
    host.printer.emit(&TransferReport(done))
}

pub fn receive(host: &Host, args: &BaselineReceiveArgs) -> Result<()> {
    if args.probe {
        host.storage.open()?;
        return host.printer.emit_json(&serde_json::json!({
            "format": host.storage.stream_format()
        }));
    }
    let received = transfer::receive(host, &mut std::io::stdin().lock())?;
    host.printer.emit(&ReceivedView(received))
}

pub fn send(host: &Host, args: &BaselineSendArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    transfer::send(host, args.generation, args.parent, args.as_files, &mut out)
}
