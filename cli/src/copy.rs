//! `atomzarr copy`: a whole store to or from object storage
//! ([`atomzarr::store::remote::copy`]; feature `remote`).

use std::time::Duration;

use atomzarr::Location;

use crate::args::RemoteArgs;

#[cfg(feature = "remote")]
pub(crate) fn copy(src: &Location, dst: &Location, remote: &RemoteArgs, wait: Duration) -> atomzarr::Result<()> {
    let r = atomzarr::store::remote::copy(src, dst, &remote.options().with_lock_timeout(wait))?;
    println!("copied {src} to {dst}: {} objects, {} bytes", r.objects, r.bytes);
    Ok(())
}

#[cfg(not(feature = "remote"))]
pub(crate) fn copy(src: &Location, _dst: &Location, _remote: &RemoteArgs, _wait: Duration) -> atomzarr::Result<()> {
    Err(atomzarr::Error::Remote {
        url: src.to_string(),
        kind: atomzarr::RemoteErrorKind::Unsupported,
        reason: "this build of atomzarr has no `remote` feature (copy needs it)".into(),
    })
}
