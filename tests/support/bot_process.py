"""`countersign` as a separate process, the way an operator (or an outside check) runs it."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import sys
from pathlib import Path

import httpx

_PICKED: set[int] = set()
_BELOW_EPHEMERAL = range(20000, 32000)
"""Ports `free_port` picks from: below Linux's ephemeral range (32768-60999 by default)."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now, for a process the test starts to bind later.

    Picked at random below the ephemeral range, not by binding port 0: between the release and
    the process's own bind, the kernel hands ephemeral ports to other sockets (the source port
    of every outgoing connection, a stand-in bound to port 0, a second suite beside this one),
    and a port it had just given out came back ("Address already in use", or another test's
    health checks reaching a stand-in). Each port is handed out once per test process.
    """
    while True:
        port = random.choice(_BELOW_EPHEMERAL)
        if port in _PICKED:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PICKED.add(port)
        return port


def base_env(**values: str) -> dict[str, str]:
    """A clean environment: only what a process needs plus `values` (no stray credentials)."""
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TMPDIR") if key in os.environ}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(values)
    return env


class BotProcess:
    """`python -m countersign.cli <command>` in `cwd` with `env`; stderr kept for diagnosis."""

    def __init__(self, env: dict[str, str], cwd: Path, command: str = "run", args: tuple[str, ...] = ()) -> None:
        self.env = env
        self.cwd = cwd
        self.command = command
        self.args = args
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = b""
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> BotProcess:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "countersign.cli",
            self.command,
            *self.args,
            env=self.env,
            cwd=self.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._collect())
        return self

    async def _collect(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(4096):
            self.stderr += chunk

    async def wait_healthy(self, port: int, timeout: float = 60) -> None:
        """Poll GET /healthz until it answers 200 (or the process dies)."""
        deadline = asyncio.get_running_loop().time() + timeout
        async with httpx.AsyncClient() as client:
            while True:
                assert self.proc is not None
                if self.proc.returncode is not None:
                    raise AssertionError(f"bot exited {self.proc.returncode}:\n{self.stderr.decode()}")
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    raise AssertionError(f"bot not healthy after {timeout}s:\n{self.stderr.decode()}")
                await asyncio.sleep(0.1)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send `sig` and wait for the exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"bot did not stop within {timeout}s:\n{self.stderr.decode()}") from None
        if self._reader is not None:
            await self._reader
        return code

    async def wait(self, timeout: float = 60) -> int:
        """Wait for the process to exit by itself."""
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        if self._reader is not None:
            await self._reader
        return code


def chat_env(*, gemini_url: str, allowed_host: str, db_url: str, api_key: str = "k") -> dict[str, str]:
    """`base_env` for `countersign chat` on `db_url`: the Gemini stand-in at `gemini_url`, `http_request`
    allowed to `allowed_host`, log lines at WARNING and above only (kept out of the conversation)."""
    return base_env(
        GOOGLE_API_KEY=api_key,
        GEMINI_BASE_URL=gemini_url,
        DATABASE_URL=db_url,
        HTTP_REQUEST_ALLOWED_HOSTS=allowed_host,
        LOG_LEVEL="WARNING",
    )


async def start_chat(env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """Start `countersign chat` with piped stdin, stdout and stderr (the caller types and reads)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "countersign.cli",
        "chat",
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def run_chat(env: dict[str, str], cwd: Path, stdin: bytes, *, timeout: float = 120) -> tuple[int, str, str]:
    """Run `countersign chat` with `stdin` typed into it until it exits; its status, stdout and stderr.

    Raises:
        TimeoutError: it did not exit within `timeout` seconds (it is left to the test's cleanup).
    """
    proc = await start_chat(env, cwd)
    out, err = await asyncio.wait_for(proc.communicate(stdin), timeout=timeout)
    return proc.returncode or 0, out.decode(), err.decode()
