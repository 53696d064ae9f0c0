#!/usr/bin/env python3
"""The image test (`make image-test`, as root): builds the operators' image twice with
image/build.sh, compares the two, unpacks it into a root filesystem and runs every binary in it
there only (chroot, as user 65532, empty environment), and checks it against the Dockerfile.

    IMAGE_PROFILE=debug|release (default debug: the binaries `cargo build` made; make image-test
    builds them first). ETCD_OPERATOR_TOOLS names the etcdutl binaries (default .tools/bin).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import ociimage  # noqa: E402

PROFILE = os.environ.get("IMAGE_PROFILE", "debug")
OPERATORS = ["etcd-cluster-operator", "etcd-backup-operator", "etcd-restore-operator"]


def workspace_version() -> str:
    with open(os.path.join(REPO, "Cargo.toml")) as f:
        for line in f:
            if line.startswith("version = "):
                return line.split('"')[1]
    raise AssertionError("no workspace version in Cargo.toml")


def build(out: str) -> str:
    env = dict(os.environ, IMAGE_OUT=out, IMAGE_GZIP_LEVEL=os.environ.get("IMAGE_GZIP_LEVEL", "1"))
    run = subprocess.run([os.path.join(HERE, "build.sh"), PROFILE], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise AssertionError(f"image/build.sh {PROFILE} failed:\n{run.stderr}")
    return run.stdout.strip()


def in_image(rootfs: str, *argv: str, user: str = "65532:65532") -> subprocess.CompletedProcess:
    """Runs argv inside the root filesystem only, as 65532:65532 with no supplementary group
    beyond it and an environment of PATH alone."""
    chroot = shutil.which("chroot", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if chroot is None:
        raise AssertionError("chroot not found (coreutils)")
    return subprocess.run(
        [chroot, f"--userspec={user}", f"--groups={user.split(':')[1]}", rootfs, *argv],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        if os.geteuid() != 0:
            raise AssertionError("the image test needs root (chroot, files owned by 65532)")
        cls.tmp = tempfile.mkdtemp(prefix="image-test-")
        start = time.monotonic()
        cls.digest_a = build(os.path.join(cls.tmp, "a"))
        cls.build_seconds = time.monotonic() - start
        cls.digest_b = build(os.path.join(cls.tmp, "b"))
        cls.layout = os.path.join(cls.tmp, "a")
        cls.rootfs = os.path.join(cls.tmp, "rootfs")
        ociimage.unpack(cls.layout, cls.rootfs)
        size = os.path.getsize(cls.layout + ".tar") / 2**20
        print(f"\nimage ({PROFILE}): {cls.digest_a}, {size:.0f} MiB, built in {cls.build_seconds:.1f} s", file=sys.stderr)

    @classmethod
    def tearDownClass(cls) -> None:
        if os.environ.get("KEEP_TEST_DIRS"):
            print(f"kept {cls.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_two_builds_are_identical(self) -> None:
        self.assertEqual(self.digest_a, self.digest_b)
        with open(os.path.join(self.tmp, "a.tar"), "rb") as a, open(os.path.join(self.tmp, "b.tar"), "rb") as b:
            self.assertTrue(a.read() == b.read(), "the two tarballs differ byte for byte")

    def test_each_binary_runs_inside_the_image_as_nonroot(self) -> None:
        version = workspace_version()
        for name in OPERATORS:
            with self.subTest(binary=name):
                help_ = in_image(self.rootfs, f"/usr/local/bin/{name}", "--help")
                self.assertEqual(help_.returncode, 0, help_.stderr)
                self.assertIn("Usage:", help_.stdout)
                ver = in_image(self.rootfs, f"/usr/local/bin/{name}", "--version")
                self.assertEqual(ver.returncode, 0, ver.stderr)
                self.assertEqual(ver.stdout.strip(), f"{name} {version}")
        dockerfile = ociimage.parse_dockerfile(os.path.join(REPO, "Dockerfile"))
        self.assertEqual(len(dockerfile.etcd_versions), 4, dockerfile.etcd_versions)
        for path, etcd_version in dockerfile.etcd_versions.items():
            with self.subTest(binary=path):
                help_ = in_image(self.rootfs, path, "--help")
                self.assertEqual(help_.returncode, 0, help_.stderr)
                self.assertIn("etcdutl", help_.stdout)
                # etcdutl has no --version flag ("unknown flag: --version"): its `version` command.
                ver = in_image(self.rootfs, path, "version")
                self.assertEqual(ver.returncode, 0, ver.stderr)
                self.assertIn(f"etcdutl version: {etcd_version}", ver.stdout)

    def test_runs_as_65532_with_only_the_image_files(self) -> None:
        _, config, _ = ociimage.read_image(self.layout)
        self.assertEqual(config["config"]["User"], "65532:65532")
        self.assertEqual(config["config"]["Entrypoint"], ["/usr/local/bin/etcd-cluster-operator"])
        labels = config["config"]["Labels"]
        self.assertEqual(labels["org.opencontainers.image.version"], workspace_version())
        self.assertEqual(len(labels["org.opencontainers.image.revision"]), 40)
        top = sorted(os.listdir(self.rootfs))
        self.assertEqual(top, ["etc", "home", "lib", "lib64", "tmp", "usr"])
        with open(os.path.join(self.rootfs, "etc/passwd")) as f:
            self.assertIn("nonroot:x:65532:65532:", f.read())
        home = os.stat(os.path.join(self.rootfs, "home/nonroot"))
        self.assertEqual((home.st_uid, home.st_gid), (65532, 65532))
        with open(os.path.join(self.rootfs, "etc/ssl/certs/ca-certificates.crt")) as f:
            self.assertGreater(f.read().count("BEGIN CERTIFICATE"), 100)
        # Nothing in the image is writable by 65532 but its home and /tmp.
        for root, dirs, files in os.walk(self.rootfs):
            for name in dirs + files:
                path = os.path.join(root, name)
                st = os.lstat(path)
                rel = "/" + os.path.relpath(path, self.rootfs)
                if rel.startswith("/home/nonroot") or rel == "/tmp" or os.path.islink(path):
                    continue
                self.assertEqual(st.st_uid, 0, rel)
                self.assertFalse(st.st_mode & 0o002, rel)

    def test_the_dockerfile_builds_the_same_image(self) -> None:
        problems = ociimage.check_dockerfile(os.path.join(REPO, "Dockerfile"), self.layout)
        self.assertEqual(problems, [])

    def test_a_dockerfile_that_differs_is_reported(self) -> None:
        with open(os.path.join(REPO, "Dockerfile")) as f:
            original = f.read()
        changes = {
            "USER 65532:65532": "user: the Dockerfile says '1000:1000'",
            "/usr/local/bin/etcdutl-3.7\n": "files: ",
            'ENTRYPOINT ["/usr/local/bin/etcd-cluster-operator"]': "entrypoint: ",
            "licenses=Apache-2.0": "label org.opencontainers.image.licenses",
            "cc-debian12": "base: ",
        }
        replacements = ["USER 1000:1000", "/usr/local/bin/etcdutl-3.8\n",
                        'ENTRYPOINT ["/usr/local/bin/etcd-backup-operator"]', "licenses=MIT", "cc-debian13"]
        with tempfile.TemporaryDirectory() as tmp:
            for (old, expected), new in zip(changes.items(), replacements):
                with self.subTest(change=new):
                    self.assertIn(old, original)
                    changed = os.path.join(tmp, "Dockerfile")
                    with open(changed, "w") as f:
                        f.write(original.replace(old, new))
                    problems = ociimage.check_dockerfile(changed, self.layout)
                    self.assertEqual(len(problems), 1, problems)
                    self.assertIn(expected, problems[0])

    def test_the_uid_is_dropped(self) -> None:
        # A root-only directory: etcdutl run as 65532 cannot open a file in it, as root it can
        # (and then fails on the empty file instead).
        probe = os.path.join(self.rootfs, "probe")
        os.mkdir(probe, 0o700)
        try:
            open(os.path.join(probe, "snap.db"), "wb").close()
            as_nonroot = in_image(self.rootfs, "/usr/local/bin/etcdutl", "snapshot", "status", "/probe/snap.db")
            self.assertNotEqual(as_nonroot.returncode, 0)
            self.assertIn("permission denied", as_nonroot.stdout + as_nonroot.stderr)
            as_root = in_image(self.rootfs, "/usr/local/bin/etcdutl", "snapshot", "status", "/probe/snap.db",
                               user="0:0")
            self.assertNotIn("permission denied", as_root.stdout + as_root.stderr)
        finally:
            shutil.rmtree(probe)

    def test_the_layout_names_the_chart_default_image(self) -> None:
        with open(os.path.join(self.layout, "index.json")) as f:
            index = json.load(f)
        name = index["manifests"][0]["annotations"]["io.containerd.image.name"]
        self.assertEqual(name, f"ghcr.io/etcd-operator-rs/etcd-operator:{workspace_version()}")


class EtcdImagesTest(unittest.TestCase):
    """The etcd images (image/build-etcd.sh): each binary runs inside its image and is the minor's."""

    def test_each_minor_runs_inside_its_image(self) -> None:
        with tempfile.TemporaryDirectory(prefix="etcd-images-") as tmp:
            env = dict(os.environ, IMAGE_OUT_DIR=tmp, IMAGE_GZIP_LEVEL="1")
            run = subprocess.run([os.path.join(HERE, "build-etcd.sh")], env=env, capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stderr)
            built = dict((line.split()[0], line.split()[1]) for line in run.stdout.splitlines())
            self.assertEqual(sorted(built), ["etcd-3.4", "etcd-3.5", "etcd-3.6", "etcd-3.7"])
            for name, version in built.items():
                with self.subTest(image=name):
                    layout, rootfs = os.path.join(tmp, name), os.path.join(tmp, name + "-rootfs")
                    _, config, _ = ociimage.read_image(layout)
                    self.assertEqual(config["config"]["Cmd"], ["/usr/local/bin/etcd"])
                    ociimage.unpack(layout, rootfs)
                    etcd = in_image(rootfs, "/usr/local/bin/etcd", "--version")
                    self.assertEqual(etcd.returncode, 0, etcd.stderr)
                    self.assertIn(f"etcd Version: {version}", etcd.stdout)
                    self.assertTrue(version.startswith(name.split("-")[1] + "."), version)
                    etcdctl = in_image(rootfs, "/usr/local/bin/etcdctl", "version")
                    self.assertEqual(etcdctl.returncode, 0, etcdctl.stderr)
                    self.assertIn(f"etcdctl version: {version}", etcdctl.stdout)
                    if name != "etcd-3.4":  # 3.4 has no etcdutl
                        etcdutl = in_image(rootfs, "/usr/local/bin/etcdutl", "version")
                        self.assertEqual(etcdutl.returncode, 0, etcdutl.stderr)
                        self.assertIn(f"etcdutl version: {version}", etcdutl.stdout)
                    with open(os.path.join(layout, "index.json")) as f:
                        ref = json.load(f)["manifests"][0]["annotations"]["io.containerd.image.name"]
                    self.assertEqual(ref, f"gcr.io/etcd-development/etcd:v{version}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
