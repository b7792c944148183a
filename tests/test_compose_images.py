"""docker-compose.yml's images: pinned (ours to this release's version), none the deprecated
temporalio/auto-setup; Temporal's server and admin-tools share one version, which, with the
UI's, is no older than what the installed Temporal CLI's dev server runs (`temporal
--version`, the server the tests exercise). Whether the images start is not checked here."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.deploy_env import AGENT_IMAGE, ROOT
from tests.test_compose import AGENT_SERVICES, SERVICES, image_repo


def image_tag(service: str) -> str:
    image = str(SERVICES[service]["image"])
    return image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""


def test_no_image_is_the_deprecated_auto_setup_and_every_image_is_pinned() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name, svc in SERVICES.items():
        image, tag = str(svc["image"]), image_tag(name)
        assert not image.startswith("temporalio/auto-setup"), name
        assert tag and tag != "latest", f"{name}: {image} is not pinned"
        if name in AGENT_SERVICES:
            # One image for agentctl, built here and tagged with this release.
            assert (image_repo(name), tag) == (AGENT_IMAGE, version), name
    assert {image_repo(n) for n in SERVICES} >= {
        "temporalio/server",
        "temporalio/admin-tools",
        "temporalio/ui",
    }


def _release(tag: str) -> tuple[int, ...]:
    assert re.fullmatch(r"\d+\.\d+\.\d+", tag), f"not a release version: {tag}"
    return tuple(int(part) for part in tag.split("."))


def test_temporal_images_share_one_version_no_older_than_the_dev_stacks_server() -> None:
    """The schema job's temporal-sql-tool carries its own server's schema, so admin-tools is
    the server's version; and the deployment runs no older a server (or UI) than the
    Temporal CLI's dev server the tests run, which names both: `temporal --version`."""
    tags = {image_repo(n): image_tag(n) for n in SERVICES}
    admin = {image_tag(n) for n in SERVICES if image_repo(n) == "temporalio/admin-tools"}
    assert admin == {tags["temporalio/server"]}, (admin, tags["temporalio/server"])
    cli = Path(sys.executable).with_name("temporal")
    done = subprocess.run(
        [str(cli), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    dev = dict(re.findall(r"(Server|UI) (\d+\.\d+\.\d+)", done.stdout))
    assert dev.keys() == {"Server", "UI"}, done.stdout
    assert _release(tags["temporalio/server"]) >= _release(dev["Server"]), dev
    assert _release(tags["temporalio/ui"]) >= _release(dev["UI"]), dev
