//! `set_bounded_codecs`: zarrs' process-wide codec registry holds
//! atomzarr's bounded blosc and zstd decoders only while the user lets it.
//! A test binary of its own, as the setting is process-wide.

mod common;

use atomzarr::{AtomicDataZarrReader, Error, Reader, ReaderExt};

/// The error of reading every sample of `store`, whose positions chunk
/// claims 64 MiB in its blosc header (the chunk decodes to 192 bytes).
fn read_reason(store: &std::path::Path) -> String {
    let r = AtomicDataZarrReader::open(store).unwrap();
    let all: Vec<i64> = (0..r.len() as i64).collect();
    match r.read_many(&all) {
        Err(Error::Chunk { array, reason, .. }) => {
            assert_eq!(array, "core/positions");
            reason
        }
        other => panic!("expected a chunk error, got {other:?}"),
    }
}

#[test]
fn the_bounded_decoders_come_and_go_with_the_setting() {
    let dir = common::tmpdir();
    let store = common::blosc_store_claiming(dir.path(), 64 << 20);

    let bounded = "blosc: header claims 67108864 bytes";
    assert!(read_reason(&store).contains(bounded), "installed by the first open");
    atomzarr::store::set_bounded_codecs(false);
    let own = read_reason(&store);
    assert!(!own.contains(bounded), "zarrs' own decoder after opting out: {own}");
    atomzarr::store::set_bounded_codecs(true);
    assert!(read_reason(&store).contains(bounded), "installed again");
}
