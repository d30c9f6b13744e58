"""kael.serve's page in a real browser (Playwright driving Debian's headless Chromium): it loads,
a prompt streams a completion equal to the API's for the same seed, Stop stops a generation and
frees its slot. A screenshot is kept in the test's tmp_path."""
import os
import shutil

import httpx
import pytest

from serve_helpers import Server, make_model_dir, wait_until

from playwright import sync_api  # noqa: E402

# the test command installs Debian's chromium (tools/setup_env.sh): without it the test fails
CHROMIUM = "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve_page")
    model_dir, _, _ = make_model_dir(root / "page-gpt", block_size=2048, n_layer=4, n_embd=256,
                                     end_of_text=False)
    s = Server(model_dir, "--max-tokens", 2000, log_path=root / "server.log")
    yield s
    assert s.terminate() == 0, s.log()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        assert CHROMIUM is not None, "Chromium not found (tools/setup_env.sh installs Debian's chromium)"
        # The browser is not kael: a sanitizer runtime preloaded into the test process
        # (tools/run_sanitizers.sh) stays out of Chromium's launcher script, which fails under it.
        # The server keeps it, so that the instrumented extension serves the page.
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True, env=env)
        yield b
        b.close()


def test_page_streams_the_api_completion_and_stops(server, browser, tmp_path):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.base + "/")
    assert page.title() == "kael.serve"
    assert page.text_content("#model") == "page-gpt"
    page.fill("#prompt", "ROMEO:")
    page.fill("#max_tokens", "60")
    page.fill("#temperature", "0.9")
    page.fill("#seed", "1234")
    page.click("#generate")
    page.wait_for_function("document.body.dataset.finish === 'length' || document.body.dataset.finish === 'stop'",
                           timeout=30_000)
    shown = page.text_content("#completion")
    api = httpx.post(server.base + "/v1/completions", json={"model": "page-gpt", "prompt": "ROMEO:", "max_tokens": 60,
                                                            "temperature": 0.9, "seed": 1234}).json()
    assert shown == api["choices"][0]["text"]
    stats = page.text_content("#stats")
    assert f"{api['usage']['completion_tokens']} tokens" in stats and "tokens/s" in stats
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert os.path.getsize(tmp_path / "page.png") > 1000

    # a long generation: tokens arrive one by one, Stop ends it, the server frees the slot
    page.fill("#max_tokens", "2000")
    page.fill("#seed", "")
    page.click("#generate")
    page.wait_for_function("document.getElementById('completion').textContent.length > 20", timeout=30_000)
    assert page.is_enabled("#stop_button") and not page.is_enabled("#generate")
    assert server.health()["active"] == 1
    page.click("#stop_button")
    page.wait_for_function("document.body.dataset.finish === 'stopped'", timeout=10_000)
    assert wait_until(lambda: server.health()["active"] == 0, timeout=10)
    stopped_at = page.text_content("#completion")
    assert "stopped" not in page.text_content("#completion") and len(stopped_at) > 20
    assert page.is_enabled("#generate")
    page.screenshot(path=str(tmp_path / "page-stopped.png"), full_page=True)
    assert not errors
