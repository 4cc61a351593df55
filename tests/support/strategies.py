"""Hypothesis strategies for config documents: any YAML-shaped value under the config's keys."""

from __future__ import annotations

from hypothesis import strategies as st

from cockpit.config.schema import _LANE_KEYS, _TOP_KEYS

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["5m", "1h", "90d", "-2h", "0s", "h100", "llama-3.1-8b", "vllm", "auto",
                     'job="a"', "http://127.0.0.1:1", "https://127.0.0.1:1/x", "1e3", "8.9e14",
                     "~", "", " ", "{}", "[]", "yes", "no", "0x1f", "!!binary", "NaN"]),
)  # fmt: skip


values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


auth = st.dictionaries(
    st.sampled_from(
        ["bearer_env", "bearer_file", "username", "password_env", "password_file", "x"]
    ),
    values,
    max_size=3,
)


lane = st.dictionaries(
    st.sampled_from([*_LANE_KEYS, "nmae"]),
    st.one_of(values, auth),
    max_size=6,
).map(lambda d: {"name": "a", **d} if d and "name" not in d and len(d) % 2 else d)


documents = st.dictionaries(
    st.sampled_from([*_TOP_KEYS, "refrsh"]),
    st.one_of(values, st.lists(lane, max_size=3), st.lists(values, max_size=3)),
    max_size=5,
)
