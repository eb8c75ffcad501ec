"""A client for any OpenAI-compatible completion server (``vllm serve``, hosted models).

Two APIs:

* ``completions`` (default; vLLM servers): the chat template is applied here, the
  prompt is sent as token ids to ``/v1/completions``, and the reply carries the
  sampled token ids (``return_tokens_as_token_ids``) and their logprobs, so
  episodes are trainable exactly as with the in-process backends;
* ``chat``: ``/v1/chat/completions`` with the messages, for hosted models in
  tournaments and evaluation (text only: no token ids or logprobs).

Both send the request's own sampling: ``temperature`` (0 is greedy on vLLM and
OpenAI servers), ``top_p``, ``max_tokens`` and the ``stop`` strings, which the
server cuts from the text.

The HTTP client is ``httpx``: one pooled client per policy (keep-alive connections,
up to ``max_concurrency`` of them), whose requests of one batch go out concurrently
from a thread pool (the server batches them). Every call has a timeout
(``timeout_s``, for connecting, each read, each write and the wait for a pooled
connection); connection failures (refused, reset, a reply cut short: a server that
died), timeouts and 5xx answers are retried ``retries`` times after
``backoff_s * 2**k`` seconds (k = 0, 1, ...), by the loop in :meth:`OpenAIPolicy._post`
(httpx's own transport retries cover connection errors only, without a backoff to
set, and would hide attempts from the count below), so a dead server costs at most
``retries + 1`` attempts and ``backoff_s * (2**retries - 1)`` seconds of waiting
(plus ``timeout_s`` per attempt only for a server that accepts connections and
never answers). Then, and for anything else that is not the expected JSON, it
raises :class:`ServerError`, one line naming the policy, the URL and what came
back. Nothing hangs; ``python -m arena.train`` turns it into a one-line exit
(code 1) that says how to resume.

Prompts over the context limit fail only their own request, never the batch:

* ``completions`` knows the prompt's tokens, so it fits them with
  :func:`~arena.policies.base.fit_prompt` before sending, against ``max_model_len``
  (given, else the ``max_model_len`` that a vLLM server lists for the model
  under ``/v1/models``, asked once on first use);
* whatever still comes back as HTTP 400 naming the context length (a limit
  that is unknown, or the ``chat`` API, which cannot truncate what it does not
  tokenise) becomes that request's ``finish_reason="overflow"`` completion, in
  either overflow mode. It is not retried: one attempt per request, and only
  a 400 whose message names the context length is read this way; every other
  4xx still raises.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import weakref
from pathlib import Path
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from arena.policies.base import (
    Completion, Overflow, Request, chat_prompt_ids, check_overflow, fit_prompt, overflow_completion,
)
from arena.policies.choices import refuse_choices


class ServerError(RuntimeError):
    """The server is unreachable or answered something unusable."""


class ContextOverflow(ServerError):
    """The server rejected one request because its prompt exceeds the model's context."""


# How vLLM (0.32: "This model's maximum context length is ...", "... is longer than the
# maximum model length of ...") and OpenAI ("context_length_exceeded") word it.
_CONTEXT_ERROR = re.compile(
    r"maximum context length|context_length_exceeded|longer than the maximum model length", re.IGNORECASE
)


class OpenAIPolicy:
    """A :class:`~arena.policies.base.Policy` on an OpenAI-compatible server.

    ``max_model_len`` is the server model's context (``completions`` only; None:
    ask the server's ``/v1/models`` once); ``overflow`` says what a prompt over it
    becomes (see the module docstring).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: str | None = None,
        api: Literal["completions", "chat"] = "completions",
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_concurrency: int = 64,
        name: str = "openai",
        max_model_len: int | None = None,
        overflow: Overflow = "truncate",
        weights_dir: str | None = None,
        nccl_address: str | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api = api
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_concurrency = max_concurrency
        self.name = name
        self.overflow = check_overflow(overflow)
        self.max_model_len = max_model_len
        self._limit_asked = max_model_len is not None
        self._limit_lock = threading.Lock()
        import httpx  # here, not at the top: arena/cli.py imports ServerError from this module

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )
        self.weight_version = 0  # updates pushed (load_weights); the server must hold this one
        self.redeliveries = 0  # times a server answered an older version (restarted) and got the newest again
        self._weights_dir = _weights_folder(weights_dir)
        # A folder made here goes at close(), or when the policy is collected or the interpreter exits without it.
        self._drop_dir = (weakref.finalize(self, shutil.rmtree, str(self._weights_dir), True)
                          if weights_dir == "" and self._weights_dir is not None else None)
        self._nccl = None
        if nccl_address:  # GPU machines: vLLM's NCCL transfer (arena/policies/nccl_push.py; written, not yet run)
            from arena.policies.nccl_push import NCCLPush

            self._nccl = NCCLPush(self.base_url, nccl_address)
        self._latest: str | None = None
        self._weights_lock = threading.Lock()
        self.tokenizer = None
        if api == "completions":
            from transformers import AutoTokenizer

            from arena.core.models import resolve_model

            self.tokenizer = AutoTokenizer.from_pretrained(resolve_model(tokenizer or model))

    # ------------------------------------------------------------------ HTTP
    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                resp = self._client.post(url, json=body)
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as e:  # a wrong base_url: no retry helps
                raise ServerError(f"policy '{self.name}': {url}: {e}") from None
            except httpx.TransportError as e:
                # refused, reset, timed out, or a reply cut short by a server that died mid-answer
                last = str(e) or type(e).__name__
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                continue
            if resp.status_code >= 400:
                detail = resp.text[:4000]
                if resp.status_code == 400 and _CONTEXT_ERROR.search(detail):
                    raise ContextOverflow(f"{url}: {detail[:300]}")
                raise ServerError(f"{url} rejected the request (HTTP {resp.status_code}): {detail[:300]}")
            try:
                return json.loads(resp.content)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ServerError(f"{url} returned non-JSON: {resp.content[:200]!r}") from None
        raise ServerError(
            f"policy '{self.name}': cannot reach {url} after {self.retries + 1} attempts ({last}); "
            "is the server running?"
        )

    def close(self) -> None:
        """Close the pooled connections (the policy is not used afterwards) and remove a weights folder made here."""
        self._client.close()
        if self._drop_dir is not None:
            self._drop_dir()

    # ------------------------------------------------------------------ weights (python -m arena.serve)
    def load_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Send the learner's weights to the server (``python -m arena.serve``): a safetensors file in the
        weights folder, announced by ``POST /collective_rpc`` (``arena_load_weights_file(path, version)``),
        then ``POST /reset_prefix_cache``. The file stays until the next push, so a restarted server can
        be given it again (:meth:`ensure_weights`)."""
        if self._nccl is not None:
            self._nccl.push(named_tensors, self.weight_version + 1)
            self.weight_version += 1
            return
        if self._weights_dir is None:
            raise ServerError(f"policy '{self.name}': set sync_weights: true to send weights to the server")
        from safetensors.torch import save_file

        version = self.weight_version + 1
        path = self._weights_dir / f"weights_{version:06d}.safetensors"
        tensors: dict[str, Any] = {}
        seen: set[int] = set()
        for name, t in named_tensors:  # safetensors refuses shared storage (tied embeddings): copy repeats
            t = t.detach().to("cpu").contiguous()
            ptr = t.untyped_storage().data_ptr()
            tensors[name] = t.clone() if ptr in seen else t
            seen.add(ptr)
        partial = path.with_suffix(".partial")
        save_file(tensors, str(partial))
        partial.replace(path)  # the server never reads half a file
        with self._weights_lock:
            self._deliver(str(path), version)
            old, self._latest, self.weight_version = self._latest, str(path), version
        if old and old != str(path):
            Path(old).unlink(missing_ok=True)

    def _deliver(self, path: str, version: int) -> None:
        reply = self._post("/collective_rpc", {"method": "arena_load_weights_file", "args": [path, str(version)]})
        if not reply.get("results") or not all(isinstance(r, int) or str(r).isdigit() for r in reply["results"]):
            raise ServerError(f"policy '{self.name}': {self.base_url} did not load the weights: {str(reply)[:200]}")
        self._post("/reset_prefix_cache", {})

    def server_weight_version(self) -> int:
        """The update the server's weights come from (0: as it started)."""
        reply = self._post("/collective_rpc", {"method": "arena_weight_version"})
        try:
            return min(int(r) for r in reply["results"])
        except (KeyError, TypeError, ValueError) as e:
            raise ServerError(f"policy '{self.name}': {self.base_url} is not an arena.serve server ({e!r}: "
                              f"{str(reply)[:200]}); start it with python -m arena.serve") from None

    def ensure_weights(self) -> None:
        """Before a rollout: a server that holds older weights (restarted since the last push) gets the newest."""
        if self._latest is None:
            return
        with self._weights_lock:
            if self.server_weight_version() != self.weight_version:
                self._deliver(self._latest, self.weight_version)
                self.redeliveries += 1

    def score(self, prompt_ids: list[int], completion_ids: list[int], params: Any) -> list[float]:
        """The server's logprobs of a fixed completion (teacher forcing via vLLM's ``prompt_logprobs``)."""
        self.ensure_weights()
        body = {"model": self.model, "prompt": list(prompt_ids) + list(completion_ids), "max_tokens": 1,
                "temperature": params.temperature or 1.0, "prompt_logprobs": 0}
        reply = self._post("/v1/completions", body)
        try:
            per_position = reply["choices"][0]["prompt_logprobs"][len(prompt_ids) :]
            return [float(step[str(tok)]["logprob"]) for step, tok in zip(per_position, completion_ids, strict=True)]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ServerError(f"{self.base_url}/v1/completions: no prompt logprobs ({e!r}): {str(reply)[:200]}") from None

    # ------------------------------------------------------------------ policy
    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        refuse_choices(requests, "openai")
        if not requests:
            return []
        self.ensure_weights()
        one = self._complete if self.api == "completions" else self._chat
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests))) as pool:
            return list(pool.map(one, requests))

    def context_length(self) -> int | None:
        """``max_model_len`` as given, else as the server lists it under /v1/models (asked once), else None."""
        with self._limit_lock:
            if not self._limit_asked:
                self._limit_asked = True
                self.max_model_len = self._listed_max_model_len()
        return self.max_model_len

    def _listed_max_model_len(self) -> int | None:
        # One plain attempt: a server without the listing (or without the field, as
        # hosted APIs) leaves the limit unknown and the 400 mapping in charge.
        import httpx

        try:
            resp = self._client.get(f"{self.base_url}/v1/models")
            resp.raise_for_status()
            listing = json.loads(resp.content)
            for entry in listing.get("data") or []:
                if entry.get("id") == self.model and isinstance(entry.get("max_model_len"), int):
                    return int(entry["max_model_len"])
        except (httpx.HTTPError, ValueError, AttributeError, TypeError):
            return None
        return None

    def _complete(self, req: Request) -> Completion:
        if self.tokenizer is None:
            raise RuntimeError("the completions API needs the model's tokenizer; it is loaded in __init__")
        prompt = chat_prompt_ids(self.tokenizer, req.messages)
        budget, truncated = req.params.max_new_tokens, False
        limit = self.context_length()
        if limit is not None:
            fitted = fit_prompt(prompt, budget, limit, self.overflow)
            if fitted is None:
                return overflow_completion()
            truncated = len(fitted[0]) < len(prompt)
            prompt, budget = fitted
        body = {
            "model": self.model, "prompt": prompt, "max_tokens": budget,
            "temperature": req.params.temperature, "top_p": req.params.top_p, "logprobs": 0,
            "return_tokens_as_token_ids": True,
        }
        if req.params.stop:
            body["stop"] = list(req.params.stop)
        if req.seed is not None:
            body["seed"] = req.seed % 2**31
        try:
            reply = self._post("/v1/completions", body)
        except ContextOverflow:
            return overflow_completion()
        try:
            choice = reply["choices"][0]
            text = choice["text"]
            lp = choice.get("logprobs") or {}
            tokens = [int(t.split(":", 1)[1]) for t in lp.get("tokens") or []]
            logprobs = [float(x) for x in lp.get("token_logprobs") or []]
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise ServerError(f"{self.base_url}/v1/completions: unexpected reply ({e!r}): {str(reply)[:200]}") from None
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return Completion(
            text=text, prompt_ids=prompt, completion_ids=tokens, logprobs=logprobs, finish_reason=finish,
            prompt_truncated=truncated,
        )

    def _chat(self, req: Request) -> Completion:
        body = {
            "model": self.model, "messages": list(req.messages), "max_tokens": req.params.max_new_tokens,
            "temperature": req.params.temperature, "top_p": req.params.top_p,
        }
        if req.params.stop:
            body["stop"] = list(req.params.stop)
        try:
            reply = self._post("/v1/chat/completions", body)
        except ContextOverflow:
            return overflow_completion()
        try:
            choice = reply["choices"][0]
            text = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise ServerError(f"{self.base_url}/v1/chat/completions: unexpected reply ({e!r}): {str(reply)[:200]}") from None
        return Completion(text=text, finish_reason="length" if choice.get("finish_reason") == "length" else "stop")


WEIGHTS_PREFIX = "arena-weights-"
STALE_AFTER_S = 600.0
"""A weights folder whose process is gone is removed once nothing in it has changed for this long."""


def _weights_folder(weights_dir: str | None) -> Path | None:
    """Where pushed weights go: None (no pushes), ``weights_dir``, or for ``""`` a fresh folder in /dev/shm
    (else the temp folder), named ``arena-weights-<pid>-...``. Making one first removes the folders that
    runs which died without :meth:`OpenAIPolicy.close` left there (:func:`sweep_weights_folders`)."""
    import os
    import tempfile

    if weights_dir is None:
        return None
    if weights_dir:
        folder = Path(weights_dir).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    sweep_weights_folders(Path(shm or tempfile.gettempdir()))
    return Path(tempfile.mkdtemp(prefix=f"{WEIGHTS_PREFIX}{os.getpid()}-", dir=shm))


def sweep_weights_folders(parent: Path, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the weights folders in ``parent`` left by runs that ended without closing their policy (killed,
    out of memory): a model's worth of memory each in /dev/shm, until the next reboot. A folder goes when the
    process its name carries (``arena-weights-<pid>-``) no longer exists on this machine and none of its files
    changed for ``stale_after_s`` (a live run writes one each push: the age guards a run in another pid
    namespace sharing /dev/shm). Folders of another user, or named without a pid, are left. Returns those
    removed, and says so in one line on stderr."""
    import os
    import sys

    removed: list[Path] = []
    now = time.time()
    for folder in parent.glob(f"{WEIGHTS_PREFIX}*"):
        m = re.fullmatch(re.escape(WEIGHTS_PREFIX) + r"(\d+)-.+", folder.name)
        try:
            if (m is None or int(m.group(1)) == os.getpid() or not folder.is_dir() or folder.is_symlink()
                    or folder.stat().st_uid != os.getuid() or _alive(int(m.group(1)))):
                continue
            newest = max([folder.stat().st_mtime] + [f.stat().st_mtime for f in folder.iterdir()])
        except OSError:  # gone meanwhile, or unreadable: not ours to judge
            continue
        if now - newest >= stale_after_s:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        print(f"weights: removed {len(removed)} folder(s) in {parent} left by runs that ended without closing "
              f"({', '.join(f.name for f in removed[:3])}{', ...' if len(removed) > 3 else ''})", file=sys.stderr)
    return removed


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
