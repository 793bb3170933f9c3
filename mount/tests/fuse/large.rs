//! Pins: a 30,000-file snapshot (one 5,000-entry directory, 25 of 1,000) lists and reads
//! correctly through a tree cache far smaller than the snapshot (so trees are evicted and
//! decoded again, and readdir continues across many kernel buffers).

use std::collections::BTreeSet;
use std::fs;

use zeroclaw_bundle_mount::MountOptions;

use crate::util::{dir, file, Env};

fn content(d: &str, i: usize) -> String {
    format!("{d}/{i}: {}\n", "x".repeat(i % 17))
}

#[test]
fn thirty_thousand_files_list_and_read() {
    let mut dirs = vec![("big".to_string(), 5_000usize)];
    dirs.extend((0..25).map(|d| (format!("d{d:02}"), 1_000)));
    let spec = dirs
        .iter()
        .map(|(d, n)| {
            dir(
                d,
                (0..*n)
                    .map(|i| file(format!("f{i:05}"), content(d, i)))
                    .collect(),
            )
        })
        .collect();
    let env = Env::new();
    let (root, _) = env.build(spec);
    let opts = MountOptions {
        tree_cache_entries: 2_000,
        ..MountOptions::default()
    };
    let Some(m) = env.mount(root, &opts) else {
        return;
    };
    let mut total = 0;
    let top: BTreeSet<String> = fs::read_dir(&m.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(top, dirs.iter().map(|(d, _)| d.clone()).collect());
    for (d, n) in &dirs {
        let names: Vec<String> = fs::read_dir(m.path.join(d))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), *n, "{d}: entry count");
        let unique: BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), *n, "{d}: duplicate names in the listing");
        for i in 0..*n {
            let p = m.path.join(d).join(format!("f{i:05}"));
            let got = fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert_eq!(got, content(d, i), "{p:?}");
            total += 1;
        }
    }
    assert_eq!(total, 30_000);
    // statfs answers with the snapshot's size.
    let st = rustix::fs::statfs(&m.path).unwrap();
    assert!(st.f_blocks > 0);
    assert_eq!(st.f_bfree, 0);
}
