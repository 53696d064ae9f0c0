//! Finding `argv[0]` the way runc does (Go's `exec.LookPath`), with the container's PATH (not the
//! host's) and inside the container's mount namespace, so bind-mounted `bin/` directories count.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::wire::Failure;

/// The file to execve for `program`: itself when it has a slash, else the first executable
/// `dir/program` over the `PATH` in `env` (an empty element is the working directory).
pub(crate) fn look_path(program: &str, env: &[(String, String)]) -> Result<PathBuf, Failure> {
    if program.contains('/') {
        return match check(Path::new(program)) {
            Check::Executable => Ok(PathBuf::from(program)),
            Check::Missing => Err(Failure::NotFound {
                program: program.to_string(),
            }),
            Check::Refused(reason) => Err(Failure::NotExecutable {
                program: program.to_string(),
                reason,
            }),
        };
    }
    let path_var = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    if !path_var.is_empty() {
        for dir in path_var.split(':') {
            let dir = if dir.is_empty() { "." } else { dir };
            let candidate = Path::new(dir).join(program);
            if check(&candidate) == Check::Executable {
                return Ok(candidate);
            }
        }
    }
    Err(Failure::NotFound {
        program: program.to_string(),
    })
}

#[derive(Debug, PartialEq)]
enum Check {
    Executable,
    Missing,
    /// Go's wording: "permission denied", "is a directory".
    Refused(String),
}

fn check(path: &Path) -> Check {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Check::Missing,
        Err(e) => Check::Refused(e.to_string()),
        Ok(m) if m.is_dir() => Check::Refused("is a directory".into()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Check::Refused("permission denied".into()),
        Ok(_) => Check::Executable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn env_path(p: &str) -> Vec<(String, String)> {
        vec![("PATH".into(), p.into())]
    }

    #[test]
    fn resolves_like_go_lookpath() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let other = dir.path().join("other");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&other).unwrap();
        fs::write(bin.join("tool"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(bin.join("tool"), fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable in the first directory: skipped, as Go does.
        fs::write(other.join("tool"), "data").unwrap();
        fs::write(other.join("plain"), "data").unwrap();
        let path = format!("{}:{}", other.display(), bin.display());

        struct Case<'a> {
            program: String,
            env: Vec<(String, String)>,
            want: Result<PathBuf, Failure>,
            why: &'a str,
        }
        let cases = [
            Case {
                program: "tool".into(),
                env: env_path(&path),
                want: Ok(bin.join("tool")),
                why: "first executable along PATH",
            },
            Case {
                program: "tool".into(),
                env: vec![],
                want: Err(Failure::NotFound {
                    program: "tool".into(),
                }),
                why: "no PATH in the container env: the host PATH does not count",
            },
            Case {
                program: "plain".into(),
                env: env_path(&path),
                want: Err(Failure::NotFound {
                    program: "plain".into(),
                }),
                why: "only non-executable candidates: not found",
            },
            Case {
                program: other.join("plain").display().to_string(),
                env: vec![],
                want: Err(Failure::NotExecutable {
                    program: other.join("plain").display().to_string(),
                    reason: "permission denied".into(),
                }),
                why: "a path without x bits",
            },
            Case {
                program: bin.display().to_string(),
                env: vec![],
                want: Err(Failure::NotExecutable {
                    program: bin.display().to_string(),
                    reason: "is a directory".into(),
                }),
                why: "a directory",
            },
            Case {
                program: "/no/such/file".into(),
                env: env_path(&path),
                want: Err(Failure::NotFound {
                    program: "/no/such/file".into(),
                }),
                why: "a missing path",
            },
        ];
        for c in cases {
            assert_eq!(look_path(&c.program, &c.env), c.want, "{}", c.why);
        }
    }

    #[test]
    fn later_path_entry_in_env_wins() {
        let env = vec![
            ("PATH".to_string(), "/nonexistent".to_string()),
            ("PATH".to_string(), "/bin:/usr/bin".to_string()),
        ];
        assert!(look_path("sh", &env).is_ok());
    }
}
