use serde_json::json;

use crate::Scratch;

#[test]
fn read_numbers_lines_pages_and_cuts_long_lines() {
    let s = Scratch::new("read", false);
    let text: String = (1..=250).map(|i| format!("line {i}\n")).collect();
    s.write("a.txt", &text);
    let first = s.ok("read", json!({"path": "a.txt"}));
    assert!(first.starts_with("  1\tline 1\n"), "{first}");
    assert!(first.contains("200\tline 200\n") && !first.contains("line 201\n"));
    assert!(first.ends_with("[lines 1-200 of 250; read with offset=201 for more]\n"), "{first}");
    let page = s.ok("read", json!({"path": "a.txt", "offset": 249, "limit": 5}));
    assert_eq!(page, "249\tline 249\n250\tline 250\n");
    s.write("long.txt", &"x".repeat(2500));
    let long = s.ok("read", json!({"path": "long.txt"}));
    assert!(long.contains(&format!("{}[... line cut at 2000 characters]", "x".repeat(2000))));
    assert!(!long.contains(&"x".repeat(2001)));
    s.write("dir/b.txt", "b");
    s.write("dir/sub/c.txt", "c");
    assert_eq!(s.ok("read", json!({"path": "dir"})), "b.txt\nsub/");
    let absolute = s.path().join("a.txt");
    assert!(s.ok("read", json!({"path": absolute, "limit": 1})).contains("line 1"));
    assert!(s.refused("read", json!({"path": "missing.txt"})).contains("missing.txt"));
    assert!(s.refused("read", json!({"path": "a.txt", "offset": 400})).contains("250 lines"));
    std::fs::write(s.path().join("bin"), [0u8, 1, 2]).unwrap();
    assert!(s.refused("read", json!({"path": "bin"})).contains("binary"));
}

#[test]
fn write_creates_parents_and_replaces() {
    let s = Scratch::new("write", false);
    let out = s.ok("write", json!({"path": "deep/er/f.rs", "content": "fn main() {}\n"}));
    assert!(out.starts_with("created deep/er/f.rs"), "{out}");
    assert_eq!(s.read("deep/er/f.rs"), "fn main() {}\n");
    let out = s.ok("write", json!({"path": "deep/er/f.rs", "content": "x"}));
    assert!(out.starts_with("replaced"), "{out}");
    assert!(s.refused("write", json!({"path": "deep", "content": "x"})).contains("directory"));
}

#[test]
fn edit_replaces_one_exact_string_or_refuses() {
    let s = Scratch::new("edit", false);
    s.write("f.txt", "alpha\nbeta\nbeta\n");
    let out = s.ok("edit", json!({"path": "f.txt", "old": "alpha", "new": "ALPHA"}));
    assert_eq!(out, "edited f.txt at line 1");
    assert_eq!(s.read("f.txt"), "ALPHA\nbeta\nbeta\n");
    let twice = s.refused("edit", json!({"path": "f.txt", "old": "beta", "new": "B"}));
    assert!(twice.contains("2 times"), "{twice}");
    assert_eq!(s.read("f.txt"), "ALPHA\nbeta\nbeta\n", "a refused edit changes nothing");
    let out =
        s.ok("edit", json!({"path": "f.txt", "old": "beta", "new": "B", "replace_all": true}));
    assert_eq!(out, "edited f.txt: 2 replacements");
    assert_eq!(s.read("f.txt"), "ALPHA\nB\nB\n");
    let missing = s.refused("edit", json!({"path": "f.txt", "old": "gamma", "new": "G"}));
    assert!(missing.contains("not found"), "{missing}");
    assert!(
        s.refused("edit", json!({"path": "nofile", "old": "a", "new": "b"})).contains("nofile")
    );
}

#[test]
fn edit_takes_the_one_place_that_differs_only_in_whitespace_and_says_so() {
    let s = Scratch::new("edit-tolerant", false);
    s.write("calc.py", "def add(a, b):\n    if a:\n        return a - b\n    return b\n");
    // Copied without its indentation: the block is found and `new` re-indented alike.
    let out = s.ok(
        "edit",
        json!({"path": "calc.py", "old": "if a:\n    return a - b", "new": "if a:\n    return a + b"}),
    );
    assert_eq!(
        out,
        "edited calc.py at line 2 (`old` matched at another indentation, `new` re-indented alike)"
    );
    assert_eq!(
        s.read("calc.py"),
        "def add(a, b):\n    if a:\n        return a + b\n    return b\n"
    );
    // Two places alike under the first tolerance that finds any: refused, nothing written.
    s.write("twice.sh", "x=1  \ny=2\nx=1\n");
    let refusal = s.refused("edit", json!({"path": "twice.sh", "old": "x=1\t", "new": "x=2"}));
    assert_eq!(
        refusal,
        "`old` is not in twice.sh exactly, and ignoring trailing whitespace it is found 2 times \
         (lines 1, 3): give more context to make it unique"
    );
    assert_eq!(s.read("twice.sh"), "x=1  \ny=2\nx=1\n");
    // Other text is still not found, in the one wording of a miss.
    let missing = s.refused("edit", json!({"path": "calc.py", "old": "return a * b", "new": "x"}));
    assert_eq!(missing, "`old` was not found in calc.py: read the file and copy the text exactly");
}
