//! Every side effect the operators perform has a failpoint, and every failpoint is a side effect.
//!
//! The rules, checked on the sources of the three operators and the shared crates they act
//! through (operators/*/src, crates/{operator-runtime,etcd-admin,etcd-snapshot}/src), after
//! blanking comments, string and char literals, and `#[cfg(test)]` modules (files `tests.rs`
//! and `fixtures.rs` are test-only and skipped):
//!
//! 1. A side effect is a call matching one of [`SIDE_EFFECTS`]: the Kubernetes API's write
//!    methods, operator-runtime's idempotent wrappers of them, etcd's mutating calls, and S3's
//!    mutating requests. A new way of writing must be added there (reviewers: a write that
//!    matches no pattern escapes this test).
//! 2. Each side effect lies inside the argument list of a `failpoint::around("name", ...)` call,
//!    and each such call wraps exactly one side effect: one failpoint per call site.
//! 3. The names are string literals, unique, and exactly [`failpoint::ALL`].
//! 4. The only exceptions are listed in [`EXEMPT`], each with its reason.
//!
//! Kubernetes Events are not side effects here: they record what happened and no decision reads
//! them back, so a crash around one changes nothing the operators converge on (they are
//! best-effort already: a failed publish is logged and dropped).
//!
//! So the number of side-effect call sites equals the number of failpoints; the test prints
//! the table of both.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Call patterns that change state outside the process. A pattern starting with a letter must
/// not be preceded by an identifier character (so `apply_status(` does not match
/// `my_apply_status(`).
const SIDE_EFFECTS: &[&str] = &[
    // Kubernetes (kube::Api write methods).
    ".create(",
    ".replace(",
    ".replace_status(",
    ".replace_subresource(",
    ".patch(",
    ".patch_status(",
    ".patch_metadata(",
    ".patch_subresource(",
    ".patch_scale(",
    ".delete(",
    ".delete_collection(",
    ".create_subresource(",
    ".evict(",
    // operator-runtime's wrappers of those (their bodies are exempt below).
    "create_if_absent(",
    "delete_if_present(",
    "apply_object(",
    "apply_status(",
    // etcd (etcd_client::Client mutating calls).
    ".member_add(",
    ".member_promote(",
    ".member_remove(",
    ".member_update(",
    ".move_leader(",
    ".alarm(",
    ".defragment(",
    ".compact(",
    ".put(",
    ".txn(",
    // S3 (aws_sdk_s3::Client mutating requests).
    ".create_multipart_upload(",
    ".upload_part(",
    ".upload_part_copy(",
    ".complete_multipart_upload(",
    ".abort_multipart_upload(",
    ".put_object(",
    ".copy_object(",
    ".delete_object(",
    ".delete_objects(",
    ".create_bucket(",
    ".delete_bucket(",
];

/// (file, pattern, why it has no failpoint).
const EXEMPT: &[(&str, &str, &str)] = &[
    (
        "crates/operator-runtime/src/objects.rs",
        ".create(",
        "the body of create_if_absent, whose every call is scanned",
    ),
    (
        "crates/operator-runtime/src/objects.rs",
        ".delete(",
        "the body of delete_if_present, whose every call is scanned",
    ),
    (
        "crates/operator-runtime/src/objects.rs",
        ".patch(",
        "the body of apply_object, whose every call is scanned",
    ),
    (
        "crates/operator-runtime/src/status.rs",
        ".patch_status(",
        "the body of apply_status, whose every call is scanned",
    ),
    (
        "crates/operator-runtime/src/leader.rs",
        ".create(",
        "the leader-election Lease: the election's own state, not the operator's; a crash \
         there is a lost leadership, covered by leader.rs's tests",
    ),
    (
        "crates/operator-runtime/src/leader.rs",
        ".replace(",
        "the leader-election Lease (renew, take over, release), as above",
    ),
    (
        "crates/operator-runtime/src/claim.rs",
        ".create(",
        "the namespace claim Lease: which install may act, not the operator's own state; a \
         crash there leaves a claim this install renews at its restart (or that expires), \
         covered by claim.rs's tests",
    ),
    (
        "crates/operator-runtime/src/claim.rs",
        ".replace(",
        "the namespace claim Lease (renew, take over, release), as above",
    ),
];

const SCANNED: &[&str] = &[
    "operators/cluster/src",
    "operators/backup/src",
    "operators/restore/src",
    "crates/operator-runtime/src",
    "crates/etcd-admin/src",
    "crates/etcd-snapshot/src",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_name().unwrap().to_string_lossy();
            if name != "tests.rs" && name != "fixtures.rs" {
                out.push(path);
            }
        }
    }
}

/// `src` with comments and the insides of string and char literals replaced by spaces
/// (newlines and byte offsets kept), so that parentheses and patterns are only code.
fn blank(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let fill = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
                fill(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                fill(&mut out, i, end);
                i = end;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !is_ident(b[i - 1])) =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = src[start..].find(&close).map_or(b.len(), |n| start + n);
                fill(&mut out, start, end);
                i = end + close.len();
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                fill(&mut out, i + 1, j.min(b.len()));
                i = j + 1;
            }
            // A char literal ('x', '\n', '\''), not a lifetime ('a).
            b'\'' if b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\') => {
                let end = src[i + 2..].find('\'').map_or(b.len(), |n| i + 2 + n);
                fill(&mut out, i + 1, end);
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The offset of the bracket closing the one at `open`.
fn matching(code: &[u8], open: usize) -> usize {
    let (o, c) = (code[open], if code[open] == b'(' { b')' } else { b'}' });
    let mut depth = 0;
    for (i, ch) in code.iter().enumerate().skip(open) {
        if *ch == o {
            depth += 1;
        } else if *ch == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    panic!("unbalanced bracket at offset {open}");
}

/// Blanks `#[cfg(test)] mod name { ... }`.
fn without_test_modules(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let at = from + n;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        if rest.starts_with("mod ") {
            let line_end = rest.find('\n').unwrap_or(rest.len());
            if let Some(brace) = rest[..line_end].find('{') {
                let open = code.len() - rest.len() + brace;
                let close = matching(code.as_bytes(), open);
                for c in &mut out[at..=close] {
                    if *c != b'\n' {
                        *c = b' ';
                    }
                }
            }
        }
        from = at + 1;
    }
    String::from_utf8(out).unwrap()
}

#[derive(Debug)]
struct Site {
    file: String,
    line: usize,
    offset: usize,
    pattern: &'static str,
}

#[derive(Debug)]
struct Span {
    file: String,
    line: usize,
    name: Option<String>,
    start: usize,
    end: usize,
}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset].matches('\n').count() + 1
}

/// The side-effect sites and the failpoint spans of one file.
fn scan(file: &str, src: &str) -> (Vec<Site>, Vec<Span>) {
    let code = without_test_modules(&blank(src));
    let bytes = code.as_bytes();
    let mut sites = Vec::new();
    for pattern in SIDE_EFFECTS {
        for (offset, _) in code.match_indices(pattern) {
            let starts_with_ident = is_ident(pattern.as_bytes()[0]);
            if starts_with_ident && offset > 0 && is_ident(bytes[offset - 1]) {
                continue;
            }
            sites.push(Site {
                file: file.to_owned(),
                line: line_of(src, offset),
                offset,
                pattern,
            });
        }
    }
    let mut spans = Vec::new();
    for (offset, m) in code.match_indices("failpoint::around(") {
        let open = offset + m.len() - 1;
        let end = matching(bytes, open);
        // The first argument, read from the original text (literals are blanked in `code`).
        let args = src[open + 1..end].trim_start();
        let name = args
            .strip_prefix('"')
            .and_then(|a| a.split_once('"'))
            .map(|(name, _)| name.to_owned());
        spans.push(Span {
            file: file.to_owned(),
            line: line_of(src, offset),
            name,
            start: open,
            end,
        });
    }
    (sites, spans)
}

/// Checks the rules over `files` (path, source); returns the failpoint table (name -> site) or
/// the problems.
fn check(files: &[(String, String)]) -> Result<BTreeMap<String, String>, Vec<String>> {
    let mut problems = Vec::new();
    let mut table = BTreeMap::new();
    for (file, src) in files {
        let (sites, spans) = scan(file, src);
        let mut wrapped: Vec<usize> = vec![0; spans.len()];
        for site in &sites {
            if EXEMPT
                .iter()
                .any(|(f, p, _)| file.ends_with(f) && *p == site.pattern)
            {
                continue;
            }
            let inside: Vec<usize> = (0..spans.len())
                .filter(|i| spans[*i].start < site.offset && site.offset < spans[*i].end)
                .collect();
            match inside.as_slice() {
                [i] => wrapped[*i] += 1,
                [] => problems.push(format!(
                    "{}:{}: `{}` is a side effect outside any failpoint::around(\"name\", ...)",
                    site.file, site.line, site.pattern
                )),
                _ => problems.push(format!(
                    "{}:{}: `{}` is inside nested failpoints",
                    site.file, site.line, site.pattern
                )),
            }
        }
        for (span, count) in spans.iter().zip(wrapped) {
            let at = format!("{}:{}", span.file, span.line);
            let Some(name) = &span.name else {
                problems.push(format!("{at}: a failpoint's name must be a string literal"));
                continue;
            };
            if count != 1 {
                problems.push(format!(
                    "{at}: failpoint {name} wraps {count} side effects (one per call site)"
                ));
            }
            if !failpoint::ALL.contains(&name.as_str()) {
                problems.push(format!("{at}: failpoint {name} is not in failpoint::ALL"));
            }
            if let Some(other) = table.insert(name.clone(), at.clone()) {
                problems.push(format!("{at}: failpoint {name} is also used at {other}"));
            }
        }
    }
    if problems.is_empty() {
        Ok(table)
    } else {
        Err(problems)
    }
}

#[test]
fn every_side_effect_has_exactly_one_failpoint() {
    let root = workspace();
    let mut paths = Vec::new();
    for dir in SCANNED {
        rust_files(&root.join(dir), &mut paths);
    }
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let table = check(&files).unwrap_or_else(|problems| panic!("{}", problems.join("\n")));
    for (name, at) in &table {
        println!("{name:32} {at}");
    }
    let unused: Vec<&&str> = failpoint::ALL
        .iter()
        .filter(|n| !table.contains_key(**n))
        .collect();
    assert!(
        unused.is_empty(),
        "failpoints in ALL used nowhere: {unused:?}"
    );
    assert_eq!(table.len(), failpoint::ALL.len());
    println!(
        "{} side-effect call sites, {} failpoints",
        table.len(),
        failpoint::ALL.len()
    );
}

fn one(src: &str) -> Result<BTreeMap<String, String>, Vec<String>> {
    check(&[("operators/x/src/a.rs".to_owned(), src.to_owned())])
}

#[test]
fn the_rules_catch_what_they_should() {
    // Wrapped: fine, and its name is recorded.
    let ok = one(
        r#"async fn f() { failpoint::around("cluster.pod_create", api.create(&pp, &pod)).await?; }"#,
    );
    assert_eq!(ok.unwrap().len(), 1);
    // A bare write.
    let bare = one("async fn f() { api.delete(\"x\", &dp).await?; }").unwrap_err();
    assert!(bare[0].contains("outside any failpoint"), "{bare:?}");
    // Two writes in one failpoint.
    let two = one(r#"async fn f() { failpoint::around("cluster.status", async { a.patch(1).await; b.patch(2).await }).await; }"#).unwrap_err();
    assert!(two[0].contains("wraps 2"), "{two:?}");
    // An unknown name, and a name that is not a literal.
    let unknown = one(r#"async fn f() { failpoint::around("cluster.nope", a.patch(1)).await; }"#)
        .unwrap_err();
    assert!(unknown[0].contains("not in failpoint::ALL"), "{unknown:?}");
    let variable = one("async fn f() { failpoint::around(name, a.patch(1)).await; }").unwrap_err();
    assert!(variable[0].contains("string literal"), "{variable:?}");
    // Comments, strings and test modules are not code; a lookalike identifier is not a call.
    let quiet = one(
        "// api.create(x)\nfn f() { let s = \"a.delete(\"; my_apply_status(1); }\n#[cfg(test)]\nmod tests {\n fn g() { api.create(x); }\n}\n",
    );
    assert_eq!(quiet.unwrap().len(), 0);
}
