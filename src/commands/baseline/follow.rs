use crate::bake::BakeSource;
use crate::cli::{BaselineCutArgs, BaselineFollowArgs};
use crate::host::Host;
use crate::ops::follow::{self, CutOptions, FollowOptions};
use crate::view::follow::{CutReport, FollowReport, FollowerReport, Unfollowed};
use anyhow::Result;

pub fn follow(host: &Host, args: &BaselineFollowArgs) -> Result<()> {
    if let Some(mask) = &args.mask_sql {
        crate::access::check_readable(&host.caller, mask)?;
    }
    let password = super::super::bake::password(
        host,
        &args.source,
        args.password_file.as_deref(),
        args.ask_password,
    )?;
    let opts = FollowOptions {
        source: BakeSource::parse(&args.source, None)?.with_password(password)?,
        name: args.name.clone(),
        mask_sql: args.mask_sql.clone(),
        no_mask: args.no_mask,
        jobs: args.jobs,
        every: args.every,
    };
    let followed = follow::follow(host, &opts)?;
    if followed.existed {
        host.printer.note(format!(
            "{} follows {} already",
            followed.following.branch, followed.following.source
        ));
    }
    host.printer.emit(&FollowReport(followed))
}

pub fn cut(host: &Host, args: &BaselineCutArgs) -> Result<()> {
    if let Some(mask) = &args.mask_sql {
        crate::access::check_readable(&host.caller, mask)?;
    }
    let done = follow::cut(
        host,
        &CutOptions {
            mask_sql: args.mask_sql.clone(),
        },
    )?;
    host.printer.emit(&CutReport(done))
}

pub fn status(host: &Host) -> Result<()> {
    host.printer.emit(&FollowerReport(follow::status(host)?))
}

pub fn unfollow(host: &Host) -> Result<()> {
    let Some(view) = follow::status(host)? else {
        // Nothing to stop: the same answer a second run gets.
        return host.printer.emit(&Unfollowed(None));
    };
    host.printer.confirm(
        host.assume_yes,
        &format!(
            "Stop following {} and destroy follower {}? Generations already cut stay.",
            view.following.source, view.following.branch
        ),
        &format!(
            "unfollowing destroys follower {} and its data",
            view.following.branch
        ),
    )?;
    host.printer
        .emit(&Unfollowed(Some(follow::unfollow(host)?)))
}
