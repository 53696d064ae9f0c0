//! The image map: which host binaries stand in for an image reference, since localkube runs no
//! container runtime. A pod whose image is not mapped fails the way an unpullable image does.
//!
//! ```yaml
//! images:
//! - repository: gcr.io/etcd-development/etcd   # exact repository, normalised like docker does
//!   tags: ["v3.5.*"]                           # globs over the tag; omitted = any tag
//!   mounts: [{hostPath: /opt/etcd-3.5/bin, mountPath: /usr/local/bin}]
//!   entrypoint: ["/usr/local/bin/etcd"]        # used when the container has no `command`
//!   cmd: []                                    # used when the container has no `args`
//!   env: {PATH: /usr/local/bin:/usr/bin:/bin}  # image env, overridden by the container's env
//!   user: "65532:65532"                        # the image's USER (uid[:gid]); omitted = root
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ImageMap {
    #[serde(default)]
    pub images: Vec<ImageEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageEntry {
    pub repository: String,
    /// Globs (`*`, `?`) over the tag. Empty means any tag.
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub mounts: Vec<BinaryMount>,
    #[serde(default)]
    pub entrypoint: Vec<String>,
    #[serde(default)]
    pub cmd: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The image's working directory (`WORKDIR`), used when the container sets no `workingDir`.
    #[serde(default)]
    pub working_dir: Option<String>,
    /// The image's `USER` as numeric `uid` or `uid:gid`: who the container runs as when its
    /// security context names no `runAsUser`. Omitted means root, as for an image without USER.
    #[serde(default)]
    pub user: Option<String>,
}

/// An image's numeric `USER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageUser {
    pub uid: u32,
    /// `None` when the image gives only a uid: the runtime then uses the group of that uid in the
    /// image's /etc/passwd, which localkube does not have, so 0.
    pub gid: Option<u32>,
}

impl ImageUser {
    /// `uid` or `uid:gid`, both numeric (names would need the image's /etc/passwd).
    pub fn parse(user: &str) -> Option<ImageUser> {
        let (uid, gid) = match user.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (user, None),
        };
        Some(ImageUser {
            uid: uid.parse().ok()?,
            gid: match gid {
                Some(g) => Some(g.parse().ok()?),
                None => None,
            },
        })
    }
}

/// A host directory bind-mounted read-only into every container of the image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BinaryMount {
    pub host_path: String,
    pub mount_path: String,
}

#[derive(Debug, Error)]
pub enum ImageMapError {
    #[error("image map: {0}")]
    Syntax(String),
    #[error("image map entry {index}: repository {repository:?} is not a valid image repository")]
    BadRepository { index: usize, repository: String },
    #[error("image map entry {index}: user {user:?} must be a numeric uid or uid:gid")]
    BadUser { index: usize, user: String },
    #[error("image map entry {index}: {field} {path:?} must be an absolute path")]
    RelativePath {
        index: usize,
        field: &'static str,
        path: String,
    },
}

/// An image reference split as the docker reference library does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// Fully qualified: `docker.io/library/busybox`, `gcr.io/etcd-development/etcd`.
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    /// Normalises `busybox` to `docker.io/library/busybox` and `user/x` to `docker.io/user/x`;
    /// the first path component is a registry when it has a `.` or `:` or is `localhost`.
    /// Returns `None` for references the runtime would reject (empty, upper case repository).
    pub fn parse(image: &str) -> Option<ImageRef> {
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => (n, Some(d.to_owned())),
            None => (image, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (repo, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (
                &name[..last_slash + i],
                Some(name[last_slash + i + 1..].to_owned()),
            ),
            None => (name, None),
        };
        if repo.is_empty() || tag.as_deref() == Some("") {
            return None;
        }
        let (domain, path) = match repo.split_once('/') {
            Some((first, rest))
                if first.contains(['.', ':'])
                    || first == "localhost"
                    || first != first.to_lowercase() =>
            {
                (first, rest.to_owned())
            }
            _ => ("docker.io", repo.to_owned()),
        };
        let domain = if domain == "index.docker.io" {
            "docker.io"
        } else {
            domain
        };
        let path = if domain == "docker.io" && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c);
        if path.is_empty() || !path.chars().all(valid) || path.split('/').any(str::is_empty) {
            return None;
        }
        Some(ImageRef {
            repository: format!("{domain}/{path}"),
            tag,
            digest,
        })
    }

    /// `repository:tag` with the default tag `latest`, or `repository@digest`: what containerd
    /// reports as a container's `image`.
    pub fn normalized(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => format!("{}@{d}", self.repository),
            (None, Some(t)) => format!("{}:{t}", self.repository),
            (None, None) => format!("{}:latest", self.repository),
        }
    }
}

impl ImageMap {
    /// Parses the YAML (or JSON) file and checks every entry, so a typo fails at start-up rather
    /// than as a pod stuck in `ImagePullBackOff`.
    pub fn parse(text: &str) -> Result<ImageMap, ImageMapError> {
        let map: ImageMap =
            serde_saphyr::from_str(text).map_err(|e| ImageMapError::Syntax(e.to_string()))?;
        for (index, entry) in map.images.iter().enumerate() {
            if ImageRef::parse(&entry.repository)
                .is_none_or(|r| r.tag.is_some() || r.digest.is_some())
            {
                return Err(ImageMapError::BadRepository {
                    index,
                    repository: entry.repository.clone(),
                });
            }
            if let Some(user) = &entry.user
                && ImageUser::parse(user).is_none()
            {
                return Err(ImageMapError::BadUser {
                    index,
                    user: user.clone(),
                });
            }
            for m in &entry.mounts {
                for (field, path) in [("hostPath", &m.host_path), ("mountPath", &m.mount_path)] {
                    if !path.starts_with('/') {
                        return Err(ImageMapError::RelativePath {
                            index,
                            field,
                            path: path.clone(),
                        });
                    }
                }
            }
        }
        Ok(map)
    }

    /// The first entry whose repository equals the image's and whose tag globs match its tag
    /// (default `latest`). Digest references never match: there is no content to verify.
    pub fn resolve(&self, image: &str) -> Option<&ImageEntry> {
        let wanted = ImageRef::parse(image)?;
        if wanted.digest.is_some() {
            return None;
        }
        let tag = wanted.tag.as_deref().unwrap_or("latest");
        self.images.iter().find(|entry| {
            ImageRef::parse(&entry.repository).is_some_and(|r| r.repository == wanted.repository)
                && (entry.tags.is_empty() || entry.tags.iter().any(|g| glob_match(g, tag)))
        })
    }
}

impl ImageEntry {
    /// The image's user, or root when it names none (or, after `parse` checked it, never).
    pub fn image_user(&self) -> ImageUser {
        self.user
            .as_deref()
            .and_then(ImageUser::parse)
            .unwrap_or(ImageUser { uid: 0, gid: None })
    }

    /// A stable `imageID` for container statuses: `repository@sha256:<digest of the entry>`,
    /// so it changes exactly when the mapped binaries or defaults change.
    pub fn image_id(&self, image: &str) -> String {
        let repository = ImageRef::parse(image).map_or_else(|| image.to_owned(), |r| r.repository);
        let mut hasher = Sha256::new();
        hasher.update(repository.as_bytes());
        for m in &self.mounts {
            hasher.update(b"\0mount\0");
            hasher.update(m.host_path.as_bytes());
            hasher.update(b"\0");
            hasher.update(m.mount_path.as_bytes());
        }
        for (label, list) in [("entrypoint", &self.entrypoint), ("cmd", &self.cmd)] {
            hasher.update(label.as_bytes());
            for arg in list {
                hasher.update(b"\0");
                hasher.update(arg.as_bytes());
            }
        }
        for (k, v) in &self.env {
            hasher.update(b"\0env\0");
            hasher.update(k.as_bytes());
            hasher.update(b"=");
            hasher.update(v.as_bytes());
        }
        if let Some(user) = &self.user {
            hasher.update(b"\0user\0");
            hasher.update(user.as_bytes());
        }
        let digest = hasher.finalize();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{repository}@sha256:{hex}")
    }
}

/// The pull error kubelet reports (waiting reason `ErrImagePull`, and in the `Failed` event
/// `Failed to pull image "<image>": <this>`) for an image the map does not cover: containerd's
/// wording for a reference the registry does not have.
pub fn pull_error_message(image: &str) -> String {
    match ImageRef::parse(image) {
        Some(r) => {
            let n = r.normalized();
            let q = localkube_gofmt::quote(&n);
            format!(
                "rpc error: code = NotFound desc = failed to pull and unpack image {q}: failed to resolve reference {q}: {n}: not found"
            )
        }
        None => format!(
            "rpc error: code = InvalidArgument desc = failed to pull and unpack image {}: invalid reference format",
            localkube_gofmt::quote(image)
        ),
    }
}

/// The `ImagePullBackOff` waiting message (and `BackOff` event message).
pub fn pull_backoff_message(image: &str) -> String {
    format!("Back-off pulling image {}", localkube_gofmt::quote(image))
}

/// Shell-style glob over a tag: `*` any run, `?` one character, everything else literal.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // classic two-pointer wildcard match with backtracking to the last star
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = r#"
images:
- repository: gcr.io/etcd-development/etcd
  tags: ["v3.5.*"]
  mounts: [{hostPath: /opt/etcd-3.5/bin, mountPath: /usr/local/bin}]
  entrypoint: ["/usr/local/bin/etcd"]
  env: {PATH: "/usr/local/bin:/usr/bin:/bin"}
- repository: gcr.io/etcd-development/etcd
  tags: ["v3.4.*"]
  mounts: [{hostPath: /opt/etcd-3.4/bin, mountPath: /usr/local/bin}]
- repository: busybox
  mounts: [{hostPath: /bin, mountPath: /bin}]
  cmd: ["sh"]
"#;

    #[test]
    fn parses_references_like_docker() {
        type Parts<'a> = (&'a str, Option<&'a str>, Option<&'a str>);
        let cases: &[(&str, Option<Parts>)] = &[
            ("busybox", Some(("docker.io/library/busybox", None, None))),
            (
                "busybox:1.36",
                Some(("docker.io/library/busybox", Some("1.36"), None)),
            ),
            (
                "docker.io/busybox",
                Some(("docker.io/library/busybox", None, None)),
            ),
            (
                "docker.io/library/busybox:latest",
                Some(("docker.io/library/busybox", Some("latest"), None)),
            ),
            (
                "index.docker.io/library/busybox",
                Some(("docker.io/library/busybox", None, None)),
            ),
            (
                "bitnami/etcd:3.5",
                Some(("docker.io/bitnami/etcd", Some("3.5"), None)),
            ),
            (
                "localhost:5000/x:1",
                Some(("localhost:5000/x", Some("1"), None)),
            ),
            ("localhost/x", Some(("localhost/x", None, None))),
            (
                "gcr.io/etcd-development/etcd:v3.5.17",
                Some(("gcr.io/etcd-development/etcd", Some("v3.5.17"), None)),
            ),
            (
                "busybox@sha256:abc",
                Some(("docker.io/library/busybox", None, Some("sha256:abc"))),
            ),
            ("", None),
            ("busybox:", None),
            ("Busybox", None),
            ("a//b", None),
        ];
        for (text, expected) in cases {
            let got = ImageRef::parse(text);
            let got = got
                .as_ref()
                .map(|r| (r.repository.as_str(), r.tag.as_deref(), r.digest.as_deref()));
            assert_eq!(got, *expected, "{text}");
        }
        assert_eq!(
            ImageRef::parse("busybox").unwrap().normalized(),
            "docker.io/library/busybox:latest"
        );
    }

    #[test]
    fn an_image_user_is_numeric_and_defaults_to_root() {
        let user = |text: &str| ImageUser::parse(text).map(|u| (u.uid, u.gid));
        assert_eq!(user("65532"), Some((65532, None)));
        assert_eq!(user("65532:65533"), Some((65532, Some(65533))));
        assert_eq!(user("nonroot"), None);
        assert_eq!(user("1:x"), None);
        assert_eq!(user(""), None);
        let map = ImageMap::parse(&format!("{MAP}  user: \"10:20\"\n")).unwrap();
        assert_eq!(
            map.images[2].image_user(),
            ImageUser {
                uid: 10,
                gid: Some(20)
            }
        );
        assert_eq!(map.images[0].image_user(), ImageUser { uid: 0, gid: None });
        let err = ImageMap::parse(&format!("{MAP}  user: nonroot\n")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "image map entry 2: user \"nonroot\" must be a numeric uid or uid:gid"
        );
    }

    #[test]
    fn resolves_by_repository_and_tag_glob() {
        let map = ImageMap::parse(MAP).unwrap();
        let hosts = |image: &str| {
            map.resolve(image)
                .map(|e| e.mounts.first().map(|m| m.host_path.as_str()))
        };
        assert_eq!(
            hosts("gcr.io/etcd-development/etcd:v3.5.17"),
            Some(Some("/opt/etcd-3.5/bin"))
        );
        assert_eq!(
            hosts("gcr.io/etcd-development/etcd:v3.4.34"),
            Some(Some("/opt/etcd-3.4/bin"))
        );
        assert_eq!(hosts("gcr.io/etcd-development/etcd:v3.6.0"), None);
        // default tag latest does not match v3.5.*
        assert_eq!(hosts("gcr.io/etcd-development/etcd"), None);
        // no tags = any tag; short names normalise on both sides
        assert_eq!(hosts("busybox"), Some(Some("/bin")));
        assert_eq!(hosts("docker.io/library/busybox:1.36"), Some(Some("/bin")));
        assert_eq!(hosts("busybox@sha256:0123"), None);
        assert_eq!(hosts("quay.io/busybox"), None);
        let etcd = map.resolve("gcr.io/etcd-development/etcd:v3.5.0").unwrap();
        assert_eq!(etcd.entrypoint, ["/usr/local/bin/etcd"]);
        assert_eq!(
            etcd.env.get("PATH").map(String::as_str),
            Some("/usr/local/bin:/usr/bin:/bin")
        );
        assert!(
            etcd.image_id("gcr.io/etcd-development/etcd:v3.5.0")
                .starts_with("gcr.io/etcd-development/etcd@sha256:")
        );
        assert_ne!(
            etcd.image_id("gcr.io/etcd-development/etcd:v3.5.0"),
            map.resolve("gcr.io/etcd-development/etcd:v3.4.0")
                .unwrap()
                .image_id("gcr.io/etcd-development/etcd:v3.4.0")
        );
    }

    #[test]
    fn json_is_accepted_too() {
        let map =
            ImageMap::parse(r#"{"images":[{"repository":"busybox","tags":["1.*"]}]}"#).unwrap();
        assert!(map.resolve("busybox:1.36").is_some());
    }

    #[test]
    fn bad_files_are_typed_errors() {
        let cases = [
            ("images: [{repository: busybox, bogus: 1}]", "image map: "),
            (
                "images: [{repository: 'busybox:1'}]",
                "is not a valid image repository",
            ),
            (
                "images: [{repository: ''}]",
                "is not a valid image repository",
            ),
            (
                "images: [{repository: x, mounts: [{hostPath: bin, mountPath: /bin}]}]",
                "hostPath \"bin\" must be an absolute path",
            ),
            ("images: 3", "image map: "),
        ];
        for (text, wanted) in cases {
            let err = ImageMap::parse(text).unwrap_err().to_string();
            assert!(err.contains(wanted), "{text}: {err}");
        }
    }

    #[test]
    fn globs() {
        let cases = [
            ("*", "anything", true),
            ("*", "", true),
            ("v3.5.*", "v3.5.17", true),
            ("v3.5.*", "v3.5", false),
            ("v3.?.0", "v3.4.0", true),
            ("*-alpine", "3.5-alpine", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("latest", "latest", true),
            ("latest", "latest2", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn pull_messages() {
        assert_eq!(
            pull_error_message("nope"),
            "rpc error: code = NotFound desc = failed to pull and unpack image \"docker.io/library/nope:latest\": failed to resolve reference \"docker.io/library/nope:latest\": docker.io/library/nope:latest: not found"
        );
        assert_eq!(
            pull_backoff_message("nope"),
            "Back-off pulling image \"nope\""
        );
    }
}
