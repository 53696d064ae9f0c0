#!/usr/bin/env python3
"""Builds, unpacks and checks OCI images without Docker (Python standard library only).

    ociimage.py build --out DIR --ref NAME:TAG [--file IMAGE_PATH=HOST_PATH ...] [--hardlink A=B ...]
                      [--dir IMAGE_PATH ...] [--with-libs] [--ca-certificates] [--nonroot-user]
                      [--user U:G] [--workdir DIR] [--entrypoint ARG ...] [--cmd ARG ...] [--label K=V ...]
                      [--epoch SECONDS] [--gzip-level N]
    ociimage.py unpack DIR ROOTFS
    ociimage.py check-dockerfile DOCKERFILE DIR

`build` writes an OCI image layout at DIR (oci-layout, index.json, blobs/sha256/...) and the same
layout as one tarball DIR.tar, which `ctr images import`, `skopeo copy oci-archive:` and (through
its manifest.json) `docker load` read. The image has up to two layers: the Debian files (the
shared libraries the binaries load, found with ldd, and their copyright files; the CA bundle;
/etc/passwd with the distroless `nonroot` user 65532) and the binaries.

Reproducible: the same inputs give the same bytes. Entries are sorted, every mtime is --epoch
(make passes the commit time, SOURCE_DATE_EPOCH), owners are numeric with no names, gzip
carries no name or time, and JSON is written with sorted keys. The layer digests also depend on
the zlib that compresses them (Debian 12's here); the uncompressed layers (diff_ids) do not.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import PurePosixPath

NONROOT_UID = 65532
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Debian's ca-certificates package ships one PEM file per Mozilla root here; its
# update-ca-certificates concatenates them into CA_BUNDLE. We concatenate them the same way
# (sorted by name) instead of copying the host's bundle, which may hold local additions.
MOZILLA_CERTS = "/usr/share/ca-certificates/mozilla"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ImageError(Exception):
    pass


@dataclasses.dataclass
class Entry:
    kind: str  # "dir", "file", "symlink", "hardlink"
    mode: int = 0o755
    uid: int = 0
    gid: int = 0
    data: bytes | None = None  # file contents given inline
    source: str | None = None  # file contents read from this host path
    link: str | None = None  # symlink target (as written) or hardlink target (image path)


class Layer:
    """The entries of one layer, keyed by absolute image path; parents are implied directories."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def _put(self, path: str, entry: Entry) -> None:
        path = _image_path(path)
        for parent in list(PurePosixPath(path).parents)[:-1]:  # without "/"
            existing = self.entries.get(str(parent))
            if existing is None:
                self.entries[str(parent)] = Entry("dir")
            elif existing.kind != "dir":
                raise ImageError(f"{path}: its parent {parent} is a {existing.kind} in the image")
        existing = self.entries.get(path)
        if existing is not None and existing != entry:
            if not (existing.kind == "dir" and entry.kind == "dir"):
                raise ImageError(f"{path}: added twice with different contents")
        self.entries[path] = entry

    def dir(self, path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> None:
        self._put(path, Entry("dir", mode, uid, gid))

    def file(self, path: str, *, data: bytes | None = None, source: str | None = None, mode: int = 0o644) -> None:
        self._put(path, Entry("file", mode, data=data, source=source))

    def symlink(self, path: str, target: str) -> None:
        self._put(path, Entry("symlink", 0o777, link=target))

    def hardlink(self, path: str, target: str) -> None:
        target = _image_path(target)
        if self.entries.get(target, Entry("dir")).kind != "file":
            raise ImageError(f"hard link {path} -> {target}: the target is not a file added before it")
        self._put(path, Entry("hardlink", 0o755, link=target))

    def host_path(self, path: str) -> None:
        """Copies a host file to the same path, with every symlink met on the way (Debian 12's
        merged /usr: /lib -> usr/lib, /lib64 -> usr/lib64, the loader's absolute link)."""
        parts = PurePosixPath(path).parts[1:]
        current = ""
        for i, part in enumerate(parts):
            current += "/" + part
            if os.path.islink(current):
                target = os.readlink(current)
                self.symlink(current, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                rest = "/".join(parts[i + 1 :])
                self.host_path(resolved + ("/" + rest if rest else ""))
                return
        if not os.path.isfile(current):
            raise ImageError(f"{current}: not a file on this host")
        self.file(current, source=current, mode=os.stat(current).st_mode & 0o7777)


def _image_path(path: str) -> str:
    p = PurePosixPath("/") / path
    if ".." in p.parts or str(p) == "/":
        raise ImageError(f"{path}: not a path inside the image")
    return str(p)


def _sort_key(path: str) -> tuple[str, ...]:
    # By components, so a directory comes right before its contents ("a/b" before "a-b").
    return PurePosixPath(path).parts


class _Digesting(io.RawIOBase):
    """A write-through file object that counts and hashes what passes."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile and gzip ask where they are; they never seek
        return self.size

    def write(self, b) -> int:
        self.sha.update(b)
        self.size += len(b)
        self.inner.write(b)
        return len(b)


def write_layer(layer: Layer, blobs: str, epoch: int, gzip_level: int) -> tuple[dict, str]:
    """Writes the layer as a gzipped tar blob; returns its descriptor and its diff_id."""
    tmp = os.path.join(blobs, ".layer.tmp")
    with open(tmp, "wb") as out:
        compressed = _Digesting(out)
        with gzip.GzipFile(filename="", mode="wb", compresslevel=gzip_level, fileobj=compressed, mtime=0) as gz:
            uncompressed = _Digesting(gz)
            with tarfile.open(fileobj=uncompressed, mode="w", format=tarfile.PAX_FORMAT) as tar:
                # Hard links last: an unpacker links to a file it has already written.
                for path in sorted(layer.entries, key=lambda p: (layer.entries[p].kind == "hardlink", _sort_key(p))):
                    _add_entry(tar, path, layer.entries[path], epoch)
    digest = "sha256:" + compressed.sha.hexdigest()
    os.replace(tmp, os.path.join(blobs, compressed.sha.hexdigest()))
    return (
        {"mediaType": OCI_LAYER_GZIP, "digest": digest, "size": compressed.size},
        "sha256:" + uncompressed.sha.hexdigest(),
    )


def _add_entry(tar: tarfile.TarFile, path: str, entry: Entry, epoch: int) -> None:
    info = tarfile.TarInfo(path.lstrip("/"))
    info.mtime = epoch
    info.mode = entry.mode
    info.uid, info.gid = entry.uid, entry.gid
    info.uname = info.gname = ""
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.link or ""
        tar.addfile(info)
    elif entry.kind == "hardlink":
        info.type = tarfile.LNKTYPE
        info.linkname = (entry.link or "").lstrip("/")
        tar.addfile(info)
    elif entry.source is not None:
        info.size = os.path.getsize(entry.source)
        with open(entry.source, "rb") as f:
            tar.addfile(info, f)
    else:
        data = entry.data or b""
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def write_blob(blobs: str, data: bytes, media_type: str) -> dict:
    hexdigest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, hexdigest), "wb") as f:
        f.write(data)
    return {"mediaType": media_type, "digest": "sha256:" + hexdigest, "size": len(data)}


def canonical_json(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# --- What the binaries need from Debian ------------------------------------------------------


def shared_libraries(binary: str) -> list[str]:
    """The host paths ldd resolves for BINARY (the loader included); none for a static one."""
    run = subprocess.run(["ldd", binary], capture_output=True, text=True)
    text = run.stdout + run.stderr
    if "not a dynamic executable" in text or "statically linked" in text:
        return []
    if run.returncode != 0:
        raise ImageError(f"ldd {binary} failed: {text.strip()}")
    libs = []
    for line in text.splitlines():
        if "not found" in line:
            raise ImageError(f"ldd {binary}: {line.strip()}")
        m = re.search(r"=>\s*(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
    return libs


def debian_package(path: str) -> str:
    """The Debian package that ships PATH (dpkg knows merged-/usr files by either name)."""
    for candidate in (path, os.path.realpath(path)):
        run = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if run.returncode == 0:
            # "libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6" (or "a, b: path" when shared)
            line = next(l for l in run.stdout.splitlines() if not l.startswith("diversion"))
            return line.rsplit(": ", 1)[0].split(", ")[0]
    raise ImageError(f"{path}: no Debian package ships it (dpkg -S); the image takes only Debian's files")


def debian_version(package: str) -> str:
    run = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    if run.returncode != 0 or not run.stdout:
        raise ImageError(f"dpkg-query {package}: {run.stderr.strip()}")
    return run.stdout


def debian_release() -> str:
    with open("/etc/debian_version") as f:
        return f.read().strip().split(".")[0]


# --- build -----------------------------------------------------------------------------------


def _pair(text: str, what: str) -> tuple[str, str]:
    if "=" not in text:
        raise ImageError(f"{what} {text!r}: expected A=B")
    a, b = text.split("=", 1)
    return a, b


def build(args: argparse.Namespace) -> str:
    base, app = Layer(), Layer()
    packages: set[str] = set()

    files = [_pair(f, "--file") for f in args.file]
    for image_path, host_path in files:
        if not os.path.isfile(host_path):
            raise ImageError(f"--file {image_path}={host_path}: no such file (build it first)")
        app.file(image_path, source=os.path.realpath(host_path), mode=0o755)
    for image_path, target in (_pair(h, "--hardlink") for h in args.hardlink):
        app.hardlink(image_path, target)
    for image_path in args.dir:
        app.dir(image_path)

    if args.with_libs:
        for _, host_path in files:
            for lib in shared_libraries(host_path):
                base.host_path(lib)
                packages.add(debian_package(lib))
    if args.ca_certificates:
        names = sorted(n for n in os.listdir(MOZILLA_CERTS) if n.endswith(".crt"))
        if not names:
            raise ImageError(f"{MOZILLA_CERTS} is empty: apt-get install ca-certificates")
        bundle = b""
        for name in names:
            with open(os.path.join(MOZILLA_CERTS, name), "rb") as f:
                pem = f.read()
            bundle += pem if pem.endswith(b"\n") else pem + b"\n"
        base.file(CA_BUNDLE, data=bundle)
        packages.add(debian_package(MOZILLA_CERTS))
    for package in sorted(packages):
        name = package.split(":")[0]
        base.file(f"/usr/share/doc/{name}/copyright", source=f"/usr/share/doc/{name}/copyright")
    if args.nonroot_user:
        # As distroless's nonroot images: root and nonroot (65532), a home, a world-writable /tmp.
        base.file("/etc/passwd", data=b"root:x:0:0:root:/root:/sbin/nologin\n"
                  b"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
        base.file("/etc/group", data=b"root:x:0:\nnonroot:x:65532:\n")
        base.file("/etc/nsswitch.conf", data=b"passwd: files\ngroup: files\nhosts: files dns\n")
        base.dir("/home/nonroot", 0o700, NONROOT_UID, NONROOT_UID)
        base.dir("/tmp", 0o1777)

    out = args.out
    if os.path.exists(out):
        shutil.rmtree(out)
    blobs = os.path.join(out, "blobs", "sha256")
    os.makedirs(blobs)

    layers, diff_ids, history = [], [], []
    for name, layer in (("debian", base), ("binaries", app)):
        if not layer.entries:
            continue
        descriptor, diff_id = write_layer(layer, blobs, args.epoch, args.gzip_level)
        layers.append(descriptor)
        diff_ids.append(diff_id)
        history.append({"created": _rfc3339(args.epoch), "created_by": f"ociimage.py: {name}"})

    labels = dict(_pair(label, "--label") for label in args.label)
    env = [DEFAULT_PATH]
    if args.ca_certificates:
        env.append("SSL_CERT_FILE=" + CA_BUNDLE)
    image_config: dict = {"Env": env, "Labels": labels}
    if args.entrypoint:
        image_config["Entrypoint"] = args.entrypoint
    if args.cmd:
        image_config["Cmd"] = args.cmd
    if args.user:
        image_config["User"] = args.user
    if args.workdir or args.nonroot_user:
        image_config["WorkingDir"] = args.workdir or "/home/nonroot"
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": _rfc3339(args.epoch),
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": history,
    }
    config_descriptor = write_blob(blobs, canonical_json(config), OCI_CONFIG)
    annotations = dict(labels)
    if packages:
        # What the Debian layer was taken from, for whoever audits the image.
        annotations["rs.etcd-operator.debian"] = debian_release()
        annotations["rs.etcd-operator.debian-packages"] = ",".join(
            f"{p}={debian_version(p)}" for p in sorted(packages)
        )
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config_descriptor,
        "layers": layers,
        "annotations": annotations,
    }
    manifest_descriptor = write_blob(blobs, canonical_json(manifest), OCI_MANIFEST)
    repository, _, tag = args.ref.rpartition(":")
    if not repository or "/" in tag:
        raise ImageError(f"--ref {args.ref}: expected REPOSITORY:TAG")
    manifest_descriptor["annotations"] = {
        "io.containerd.image.name": args.ref,
        "org.opencontainers.image.ref.name": tag,
    }
    manifest_descriptor["platform"] = {"architecture": "amd64", "os": "linux"}
    with open(os.path.join(out, "oci-layout"), "wb") as f:
        f.write(canonical_json({"imageLayoutVersion": "1.0.0"}))
    with open(os.path.join(out, "index.json"), "wb") as f:
        f.write(canonical_json({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [manifest_descriptor]}))
    # docker load reads this (Docker's own `docker save` writes an OCI layout with it too).
    with open(os.path.join(out, "manifest.json"), "wb") as f:
        f.write(canonical_json([{
            "Config": "blobs/sha256/" + config_descriptor["digest"].split(":")[1],
            "RepoTags": [args.ref],
            "Layers": ["blobs/sha256/" + layer["digest"].split(":")[1] for layer in layers],
        }]))
    _tar_directory(out, out + ".tar", args.epoch)
    return manifest_descriptor["digest"]


def _rfc3339(epoch: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tar_directory(directory: str, tarball: str, epoch: int) -> None:
    paths = []
    for root, dirs, names in os.walk(directory):
        for name in dirs + names:
            paths.append(os.path.relpath(os.path.join(root, name), directory))
    with tarfile.open(tarball + ".tmp", "w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(paths, key=_sort_key):
            full = os.path.join(directory, rel)
            info = tarfile.TarInfo(rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            if os.path.isdir(full):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.mode, info.size = 0o644, os.path.getsize(full)
                with open(full, "rb") as f:
                    tar.addfile(info, f)
    os.replace(tarball + ".tmp", tarball)


# --- unpack ----------------------------------------------------------------------------------


def read_image(layout: str) -> tuple[dict, dict, str]:
    """The manifest, config and manifest digest of the layout's one image, every digest checked."""
    with open(os.path.join(layout, "index.json"), "rb") as f:
        index = json.load(f)
    if len(index.get("manifests", [])) != 1:
        raise ImageError(f"{layout}/index.json: expected exactly one manifest")
    digest = index["manifests"][0]["digest"]
    manifest = json.loads(_read_blob(layout, digest))
    config = json.loads(_read_blob(layout, manifest["config"]["digest"]))
    return manifest, config, digest


def _blob_path(layout: str, digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexdigest):
        raise ImageError(f"unsupported digest {digest}")
    return os.path.join(layout, "blobs", "sha256", hexdigest)


def _read_blob(layout: str, digest: str) -> bytes:
    with open(_blob_path(layout, digest), "rb") as f:
        data = f.read()
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise ImageError(f"blob {digest}: content does not match its digest")
    return data


def unpack(layout: str, rootfs: str) -> None:
    """Applies the layers in order onto ROOTFS (whiteouts honoured), owners kept (needs root)."""
    manifest, config, _ = read_image(layout)
    diff_ids = config["rootfs"]["diff_ids"]
    if len(diff_ids) != len(manifest["layers"]):
        raise ImageError("config's diff_ids and manifest's layers differ in number")
    os.makedirs(rootfs, exist_ok=True)
    root = os.path.realpath(rootfs)
    for descriptor, diff_id in zip(manifest["layers"], diff_ids):
        compressed = _read_blob(layout, descriptor["digest"])
        data = gzip.decompress(compressed)
        if "sha256:" + hashlib.sha256(data).hexdigest() != diff_id:
            raise ImageError(f"layer {descriptor['digest']}: uncompressed content does not match diff_id {diff_id}")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                _apply(tar, member, root)


def _apply(tar: tarfile.TarFile, member: tarfile.TarInfo, root: str) -> None:
    name = os.path.normpath(member.name)
    if name.startswith(("/", "..")):
        raise ImageError(f"layer entry {member.name}: outside the root")
    parent = os.path.join(root, os.path.dirname(name))
    if os.path.realpath(parent) != os.path.normpath(parent) and not os.path.realpath(parent).startswith(root + "/"):
        raise ImageError(f"layer entry {member.name}: its directory leads outside the root")
    base = os.path.basename(name)
    if base == ".wh..wh..opq":
        for child in os.listdir(parent):
            _remove(os.path.join(parent, child))
        return
    if base.startswith(".wh."):
        _remove(os.path.join(parent, base[4:]))
        return
    target = os.path.join(root, name)
    if os.path.lexists(target) and not (member.isdir() and os.path.isdir(target)):
        _remove(target)
    tar.extract(member, root, numeric_owner=True, set_attrs=True, filter="fully_trusted")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


# --- check-dockerfile ------------------------------------------------------------------------


@dataclasses.dataclass
class DockerfileImage:
    """What the Dockerfile's final stage says about the image."""

    base: str
    files: list[str]  # image paths the final stage's COPY instructions write
    user: str
    entrypoint: list[str]
    labels: dict[str, str]  # values with ${...} are build arguments
    etcd_versions: dict[str, str]  # /usr/local/bin/etcdutl-3.6 -> 3.6.16 (from the stages' image tags)


def parse_dockerfile(path: str) -> DockerfileImage:
    with open(path) as f:
        text = f.read()
    text = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    args: dict[str, str] = {}
    stage_image: dict[str, str] = {}
    final: list[tuple[str, str]] = []
    base = ""
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        instruction, _, rest = line.partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "ARG" and not final and "=" in rest:
            key, value = rest.split("=", 1)
            args[key] = value
        elif instruction == "FROM":
            parts = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            if len(parts) == 3 and parts[1].upper() == "AS":
                stage_image[parts[2]] = image
            base, final = image, []
        else:
            final.append((instruction, rest))
    files, labels, user, entrypoint = [], {}, "", []
    etcd_versions: dict[str, str] = {}
    for instruction, rest in final:
        if instruction == "COPY":
            tokens = rest.split()
            stage = next((t.split("=", 1)[1] for t in tokens if t.startswith("--from=")), "")
            paths = [t for t in tokens if not t.startswith("--")]
            sources, dest = paths[:-1], paths[-1]
            for source in sources:
                written = dest + os.path.basename(source) if dest.endswith("/") else dest
                files.append(written)
                tag = stage_image.get(stage, "").rpartition(":")[2]
                if "etcd" in stage_image.get(stage, "") and tag.startswith("v"):
                    etcd_versions[written] = tag[1:]
        elif instruction == "USER":
            user = rest
        elif instruction == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif instruction == "LABEL":
            for key, value in re.findall(r'([\w.\-]+)=("(?:[^"\\]|\\.)*"|\S+)', rest):
                labels[key] = json.loads(value) if value.startswith('"') else value
    return DockerfileImage(base, sorted(files), user, entrypoint, labels, etcd_versions)


def image_files(layout: str) -> dict[str, tarfile.TarInfo]:
    """Every entry of every layer, by absolute path (later layers win)."""
    manifest, _, _ = read_image(layout)
    entries: dict[str, tarfile.TarInfo] = {}
    for descriptor in manifest["layers"]:
        data = gzip.decompress(_read_blob(layout, descriptor["digest"]))
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar.getmembers():
                entries["/" + os.path.normpath(member.name)] = member
    return entries


def check_dockerfile(dockerfile: str, layout: str) -> list[str]:
    """The differences between the Dockerfile's image and the built one (empty: equivalent)."""
    want = parse_dockerfile(dockerfile)
    manifest, config, _ = read_image(layout)
    cfg = config["config"]
    problems = []
    bins = sorted(p for p, m in image_files(layout).items() if p.startswith("/usr/local/bin/") and not m.isdir())
    if bins != want.files:
        problems.append(f"files: the Dockerfile copies {want.files}, the image has {bins}")
    if cfg.get("User") != want.user:
        problems.append(f"user: the Dockerfile says {want.user!r}, the image {cfg.get('User')!r}")
    if cfg.get("Entrypoint") != want.entrypoint:
        problems.append(f"entrypoint: the Dockerfile says {want.entrypoint}, the image {cfg.get('Entrypoint')}")
    labels = cfg.get("Labels") or {}
    for key, value in want.labels.items():
        if key not in labels:
            problems.append(f"label {key}: in the Dockerfile, not in the image")
        elif "$" not in value and labels[key] != value:
            problems.append(f"label {key}: the Dockerfile says {value!r}, the image {labels[key]!r}")
    for key in labels:
        if key not in want.labels:
            problems.append(f"label {key}: in the image, not in the Dockerfile")
    m = re.search(r"-debian(\d+)", want.base)
    if m and manifest.get("annotations", {}).get("rs.etcd-operator.debian") != m.group(1):
        problems.append(
            f"base: the Dockerfile's {want.base} is Debian {m.group(1)}, the image's libraries are from Debian "
            f"{manifest.get('annotations', {}).get('rs.etcd-operator.debian')}"
        )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build an OCI layout DIR and DIR.tar")
    b.add_argument("--out", required=True)
    b.add_argument("--ref", required=True, help="REPOSITORY:TAG the layout names the image")
    b.add_argument("--file", action="append", default=[], help="IMAGE_PATH=HOST_PATH, an executable")
    b.add_argument("--hardlink", action="append", default=[], help="IMAGE_PATH=IMAGE_PATH of a --file")
    b.add_argument("--with-libs", action="store_true", help="add the shared libraries the files need (ldd)")
    b.add_argument("--ca-certificates", action="store_true", help="add Debian's CA bundle")
    b.add_argument("--nonroot-user", action="store_true", help="add /etc/passwd with nonroot (65532), /tmp")
    b.add_argument("--user")
    b.add_argument("--entrypoint", nargs="+")
    b.add_argument("--cmd", nargs="+")
    b.add_argument("--workdir", help="default: /home/nonroot with --nonroot-user")
    b.add_argument("--dir", action="append", default=[], help="an empty directory, root's, 0755")
    b.add_argument("--label", action="append", default=[], help="KEY=VALUE")
    b.add_argument("--epoch", type=int, default=int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    b.add_argument("--gzip-level", type=int, default=6)
    u = sub.add_parser("unpack", help="unpack the layout's image into a root filesystem")
    u.add_argument("layout")
    u.add_argument("rootfs")
    c = sub.add_parser("check-dockerfile", help="compare the Dockerfile's final stage with the image")
    c.add_argument("dockerfile")
    c.add_argument("layout")
    args = parser.parse_args()
    try:
        if args.command == "build":
            print(build(args))
        elif args.command == "unpack":
            unpack(args.layout, args.rootfs)
        else:
            problems = check_dockerfile(args.dockerfile, args.layout)
            for problem in problems:
                print(f"{args.dockerfile} vs {args.layout}: {problem}", file=sys.stderr)
            if problems:
                return 1
            print(f"{args.dockerfile} and {args.layout}: same files, user, entrypoint and labels")
    except (ImageError, OSError) as e:
        print(f"ociimage.py {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
