"""The service tests need the 'serve' extra; without it they are skipped (with this reason)."""

import pytest

pytest.importorskip("fastapi", reason="the service tests need fastapi, uvicorn, httpx (pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the service tests need fastapi, uvicorn, httpx (pip install -e '.[serve]')")
pytest.importorskip("httpx", reason="the service tests need fastapi, uvicorn, httpx (pip install -e '.[serve]')")
