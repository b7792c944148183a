"""What the web page reads besides the core API: the page and its files with strict security
headers, the artifact's short-lived URL as JSON (fetch() cannot follow the redirect to the
store's origin), a session's sub-agent tree, and the agents a task can name."""

from __future__ import annotations

import hashlib
import re
import uuid

import httpx
from temporalio.client import Client

from durable_agents.storage.artifact_commit import register_uploaded
from durable_agents.storage.sessions import SessionRepository
from durable_agents.workers.gateway.page import WEB_DIR
from durable_agents.workers.resources import Resources
from durable_agents.workers.stack import StackEndpoints
from tests.support.gateway import bearer, gateway_http, make_key

# What would turn an API string into markup (or code) in the page.
MARKUP_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
)


async def test_the_page_and_its_files_carry_strict_security_headers(
    migrated: StackEndpoints, resources: Resources, client: Client
) -> None:
    async with gateway_http(migrated, resources, client) as http:
        page = await http.get("/")
        script = await http.get("/web/js/app.js")
        missing = await http.get("/web/js/nothing.js")
        outside = await http.get("/web/%2e%2e/page.py")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for answer in (page, script):
        csp = answer.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp
        assert "default-src 'none'" in csp and "unsafe-inline" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
    # Only the page's document runs script; its files, opened on their own, are sandboxed.
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.headers["content-security-policy"].endswith("sandbox")
    assert "javascript" in script.headers["content-type"]
    assert missing.status_code == 404 and outside.status_code == 404
    # Every script is a file of ours: no inline script, no handler attributes, no other origin.
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)
    assert not re.search(r"\son[a-z]+=", page.text)
    assert "http" not in page.text.replace("http-equiv", "")


def test_the_page_scripts_never_turn_strings_into_markup() -> None:
    scripts = sorted(WEB_DIR.glob("js/*.js"))
    assert scripts
    for path in scripts:
        assert not MARKUP_SINKS.search(path.read_text()), path


async def test_artifact_link_gives_the_short_lived_url_as_json(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    body = b"bytes the page opens in a new tab"
    ref = await resources.store.put(tenant, body, "text/plain")
    async with resources.sessions() as db, db.begin():
        artifact_id = await register_uploaded(db, resources.store, ref, body)
    key = await make_key(resources, tenant, "read")
    other = await make_key(resources, f"{tenant}-other", "read")
    async with gateway_http(migrated, resources, client) as http:
        link = await http.get(f"/v1/artifacts/{artifact_id}/link", headers=bearer(key))
        foreign = await http.get(f"/v1/artifacts/{artifact_id}/link", headers=bearer(other))
        redirect = await http.get(f"/v1/artifacts/{artifact_id}", headers=bearer(key))
    assert link.status_code == 200, link.text
    assert link.headers["cache-control"] == "no-store"
    data = link.json()
    assert data["sha256"] == hashlib.sha256(body).hexdigest() == ref.sha256
    assert data["size_bytes"] == len(body) and data["expires_in"] == 60
    async with httpx.AsyncClient() as plain:
        assert (await plain.get(data["url"])).content == body
    assert foreign.status_code == 404
    assert redirect.status_code == 307  # the redirect stays for other clients


async def test_session_tree_and_agents(
    migrated: StackEndpoints, resources: Resources, client: Client, tenant: str
) -> None:
    root, child, grandchild = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for sid, parent in ((root, None), (child, root), (grandchild, child)):
        async with resources.sessions() as db, db.begin():  # one transaction each: in order
            await SessionRepository(db, tenant).create(
                sid, title=f"t-{sid}", model_config={}, parent_id=parent
            )
    key = await make_key(resources, tenant, "read")
    other = await make_key(resources, f"{tenant}-other", "read")
    async with gateway_http(migrated, resources, client) as http:
        tree = await http.get(f"/v1/sessions/{grandchild}/tree", headers=bearer(key))
        foreign = await http.get(f"/v1/sessions/{grandchild}/tree", headers=bearer(other))
        agents = await http.get("/v1/agents", headers=bearer(key))
    assert tree.status_code == 200, tree.text
    edges = [(s["id"], s["parent_id"]) for s in tree.json()["sessions"]]
    assert edges == [(str(root), None), (str(child), str(root)), (str(grandchild), str(child))]
    assert foreign.status_code == 404
    assert agents.json() == {"agents": ["default"]}
