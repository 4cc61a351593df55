"""The e2e test's bench: a tiny random Llama, a vLLM engine on loopback, load, raw /metrics."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

WORDS = 1000
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]
MODEL_NAME = "tiny"
MAX_MODEL_LEN = 1024


def build_model(folder: Path) -> Path:
    """A 2-layer Llama with random weights and a word-level tokenizer, saved to `folder`.

    Head size 64 (128 hidden / 2 heads): one the CPU attention supports.
    """
    if (folder / "config.json").exists():
        return folder
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(7)
    vocab = {token: i for i, token in enumerate(SPECIALS + [f"w{i}" for i in range(WORDS)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=MAX_MODEL_LEN,
    )
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=MAX_MODEL_LEN,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# --- the engine -----------------------------------------------------------------------------


@dataclass
class Engine:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    started_s: float = 0.0

    def kill(self) -> None:
        """SIGKILL the engine's process group (the API server and its engine core)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def start_engine(model: Path, port: int, log: Path, extra: list[str]) -> Engine:
    env = {
        **os.environ,
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--enable-prefix-caching", "--max-model-len", str(MAX_MODEL_LEN),
        "--max-num-seqs", "8", "--enable-mfu-metrics", *extra,
    ]  # fmt: skip
    began = time.monotonic()
    process = subprocess.Popen(
        command, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )
    engine = Engine(f"http://127.0.0.1:{port}", process, log)
    deadline = began + 400
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM exited ({process.returncode}):\n{_tail(log)}")
        try:
            if httpx.get(engine.url + "/health", timeout=2).status_code == 200:
                engine.started_s = time.monotonic() - began
                return engine
        except httpx.HTTPError:
            pass
        time.sleep(1)
    engine.kill()
    raise RuntimeError(f"vLLM did not answer /health in 400 s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


# --- load -----------------------------------------------------------------------------------


@dataclass
class Load:
    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def prompts(count: int, seed: int) -> list[tuple[str, int]]:
    """(prompt, max_tokens): four shared prefixes of 200-400 words, varied tails and lengths.

    Tails repeat a short phrase now and then, so an n-gram drafter finds something to propose.
    """
    rng = random.Random(seed)
    prefixes = [[f"w{rng.randrange(WORDS)}" for _ in range(rng.randint(200, 400))] for _ in "abcd"]
    out = []
    for _ in range(count):
        tail = [f"w{rng.randrange(WORDS)}" for _ in range(rng.randint(5, 200))]
        if rng.random() < 0.5:
            tail += tail[:12] * 3
        words = rng.choice(prefixes) + tail
        out.append((" ".join(words), rng.choice((1, 4, 16, 32, 64, 96))))
    return out


async def drive(url: str, count: int, seed: int, concurrency: int = 4) -> Load:
    """`count` completions, `concurrency` at a time, on loopback; bounded to 5 minutes."""
    load = Load()
    gate = asyncio.Semaphore(concurrency)
    began = time.monotonic()

    async def one(client: httpx.AsyncClient, prompt: str, max_tokens: int) -> None:
        body = {
            "model": MODEL_NAME,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
        }
        async with gate:
            try:
                answer = await client.post(url + "/v1/completions", json=body)
                answer.raise_for_status()
            except httpx.HTTPError as error:
                load.failures.append(f"{type(error).__name__}: {error}")
                return
        usage = answer.json()["usage"]
        load.requests += 1
        load.prompt_tokens += usage["prompt_tokens"]
        load.generation_tokens += usage["completion_tokens"]

    async with httpx.AsyncClient(timeout=120) as client:
        jobs = [one(client, p, m) for p, m in prompts(count, seed)]
        await asyncio.wait_for(asyncio.gather(*jobs), timeout=300)
    load.seconds = time.monotonic() - began
    return load


# --- raw /metrics ---------------------------------------------------------------------------


@dataclass
class Raw:
    """Sample values summed over label sets (every `finished_reason`, `le` kept apart)."""

    sums: dict[str, float]
    created: dict[str, float]

    def get(self, name: str) -> float:
        return self.sums.get(name, 0.0)

    def ratio(self, top: str, bottom: str) -> float | None:
        below = self.get(bottom)
        return self.get(top) / below if below else None

    def mean(self, histogram: str) -> float | None:
        return self.ratio(f"{histogram}_sum", f"{histogram}_count")

    def __add__(self, other: Raw) -> Raw:
        sums: dict[str, float] = defaultdict(float, self.sums)
        for name, value in other.sums.items():
            sums[name] += value
        return Raw(dict(sums), {**self.created, **other.created})


def scrape(url: str) -> tuple[Raw, str]:
    text = httpx.get(url + "/metrics", timeout=10).text
    sums: dict[str, float] = defaultdict(float)
    created: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("vllm:") or "le" in sample.labels:
                continue
            if sample.name.endswith("_created"):
                base = sample.name.removesuffix("_created")
                created[base] = min(created.get(base, sample.value), sample.value)
            else:
                sums[sample.name] += sample.value
    return Raw(dict(sums), created), text


def wait_idle(url: str, timeout: float = 60) -> None:
    """Until no request runs or waits (the engine's own gauges)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw, _ = scrape(url)
        if raw.get("vllm:num_requests_running") == 0 and raw.get("vllm:num_requests_waiting") == 0:
            return
        time.sleep(0.5)


def prom_query(prometheus: str, query: str) -> list[float]:
    """An instant query's values (empty when it has no result)."""
    answer = httpx.get(prometheus + "/api/v1/query", params={"query": query}, timeout=10).json()
    return [float(item["value"][1]) for item in answer["data"]["result"]]


def cockpit_json(*args: str) -> dict[str, object]:
    """`cockpit report ... --format json`, the lane's part."""
    done = subprocess.run(
        [sys.executable, "-m", "cockpit", "report", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not done.stdout.strip():
        raise RuntimeError(f"cockpit report {' '.join(args)} printed nothing: {done.stderr}")
    lane: dict[str, object] = json.loads(done.stdout)["lane"]
    return lane


# --- benchmark cards ------------------------------------------------------------------------

BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""
"""`vllm bench serve` without its `vllm` entry point: that one asks the package metadata for
the version of `vllm`, and vllm-cpu's distribution is named `vllm-cpu`
(PackageNotFoundError). The benchmark's own module and parser are the same code."""


def bench_serve(url: str, model: Path, result: Path, rate: float, prompts: int, seed: int) -> None:
    """One `vllm bench serve` run against the engine, its result saved to `result`."""
    args = [
        "--backend", "vllm", "--base-url", url, "--model", MODEL_NAME, "--tokenizer", str(model),
        "--dataset-name", "random", "--random-input-len", "96", "--random-output-len", "16",
        "--num-prompts", str(prompts), "--request-rate", str(rate), "--seed", str(seed),
        "--temperature", "0", "--ignore-eos", "--disable-tqdm", "--save-result",
        "--result-dir", str(result.parent), "--result-filename", result.name,
    ]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", BENCH, *args], capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if done.returncode != 0 or not result.exists():
        raise RuntimeError(f"vllm bench serve failed: {done.stderr[-2000:]}")


def cockpit_card(home: Path, *args: str) -> dict[str, object]:
    """`cockpit card ...` with its store under `home`; its JSON answer where it prints one."""
    env = {**os.environ, "XDG_DATA_HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "cockpit", "card", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"cockpit card {' '.join(args)}: {done.stderr}")
    return json.loads(done.stdout) if "--format" in args else {"markdown": done.stdout}
