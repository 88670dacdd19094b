"""A decoder-only transformer as its shape, and its parameter counts (docs/guide/llm-jobs.md).

Notation: ``L`` layers, ``h`` hidden size, ``f`` FFN (intermediate) size, ``H`` attention heads of
dimension ``dh`` (default ``h / H``), ``K`` key/value heads (GQA; ``K = H`` is multi-head
attention), ``V`` vocabulary, ``s`` sequence length. MoE layers have ``E`` routed experts of FFN
size ``fe``, ``S`` shared experts (each of size ``fe``) and route each token to ``k`` of the ``E``.

Parameter count (each term is one weight matrix or vector of the published architectures)::

    attention (GQA)   q: h*H*dh   k, v: h*K*dh each   out: H*dh*h
                      (+ biases H*dh + 2*K*dh + h when ``bias``)
    attention (MLA)   q_a: h*qr, q_a_norm: qr, q_b: qr*H*(dn+dr)     (q_a/q_b: h*H*(dn+dr) when qr = 0)
                      kv_a: h*(kr+dr), kv_a_norm: kr, kv_b: kr*H*(dn+dv), out: H*dv*h
                      (DeepSeek-V2/V3: qr = q_lora_rank, kr = kv_lora_rank, dn = qk_nope_head_dim,
                      dr = qk_rope_head_dim, dv = v_head_dim)
    FFN of size x     gated (SwiGLU): 3*h*x            plain (GeLU): 2*h*x (+ x + h biases)
    dense layer       attention + FFN(f) + 2 norms
    MoE layer         attention + E*FFN(fe) + S*FFN(fe) + router h*E + 2 norms
    norm              h (RMSNorm), 2h (LayerNorm with bias, when ``bias``)
    embeddings        V*h input, V*h output head unless tied, s*h learned positions, final norm

``total = embeddings + sum over layers``. ``active`` (per token) counts ``k`` routed experts
instead of ``E``. ``matmul_active`` leaves out what a token only looks up (the input embedding
when it is not tied to the output head, and the learned positions): the weights whose
multiply-adds give the ``6 N`` training FLOPs per token (Kaplan et al. 2020, arXiv 2001.08361;
Narayanan et al. 2021, arXiv 2104.04473, which count the output head as a matmul).
"""

from __future__ import annotations

from dataclasses import dataclass

from topoopt_ilp.errors import InputError

__all__ = ["MoE", "MLA", "TransformerModel"]


def _positive(value: object, field: str, *, zero: bool = False) -> None:
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"must be an integer >= {low}, got {value!r}", field=field)


@dataclass(frozen=True, kw_only=True)
class MoE:
    """The mixture-of-experts FFN: ``experts`` routed experts of FFN size ``expert_ffn``, ``top_k``
    of them per token, ``shared_experts`` always on. Layer ``i`` is an MoE layer when
    ``i >= first_dense_layers`` and ``(i - first_dense_layers) % layer_step == 0`` (DeepSeek-V3:
    first 3 dense, then every layer; GShard-style: ``layer_step = 2``)."""

    experts: int
    top_k: int
    expert_ffn: int
    shared_experts: int = 0
    first_dense_layers: int = 0
    layer_step: int = 1

    def __post_init__(self) -> None:
        for name in ("experts", "top_k", "expert_ffn", "layer_step"):
            _positive(getattr(self, name), f"model.moe.{name}")
        for name in ("shared_experts", "first_dense_layers"):
            _positive(getattr(self, name), f"model.moe.{name}", zero=True)
        if self.top_k > self.experts:
            raise InputError(f"top_k {self.top_k} exceeds the {self.experts} experts", field="model.moe.top_k")


@dataclass(frozen=True, kw_only=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434; DeepSeek-V3, arXiv 2412.19437):
    queries and keys/values pass through low-rank latents. ``q_lora_rank = 0`` means a full-rank
    query projection (DeepSeek-V2-Lite)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    def __post_init__(self) -> None:
        _positive(self.q_lora_rank, "model.mla.q_lora_rank", zero=True)
        for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _positive(getattr(self, name), f"model.mla.{name}")


@dataclass(frozen=True, kw_only=True)
class TransformerModel:
    """A decoder-only transformer (module docstring for the notation and the counts).

    ``gated_ffn``: SwiGLU (three matrices, Llama/Mixtral/DeepSeek) or a plain two-matrix FFN (GPT-3).
    ``bias``: linear layers and norms carry biases (GPT-3's LayerNorm); ``learned_positions``: an
    ``s x h`` position table (GPT-3) instead of rotary embeddings (no parameters).
    """

    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    vocab: int
    seq_len: int
    kv_heads: int | None = None
    head_dim: int | None = None
    moe: MoE | None = None
    mla: MLA | None = None
    gated_ffn: bool = True
    bias: bool = False
    learned_positions: bool = False
    tied_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "ffn", "heads", "vocab", "seq_len"):
            _positive(getattr(self, name), f"model.{name}")
        for name in ("gated_ffn", "bias", "learned_positions", "tied_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"expected true or false, got {getattr(self, name)!r}", field=f"model.{name}")
        if self.moe is not None and not isinstance(self.moe, MoE):
            raise InputError(f"expected an MoE, got {type(self.moe).__name__}", field="model.moe")
        if self.mla is not None and not isinstance(self.mla, MLA):
            raise InputError(f"expected an MLA, got {type(self.mla).__name__}", field="model.mla")
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _positive(self.kv_heads, "model.kv_heads")
        if self.heads % self.kv_heads:
            raise InputError(
                f"{self.heads} heads are not a multiple of {self.kv_heads} KV heads", field="model.kv_heads"
            )
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise InputError(
                    f"hidden size {self.hidden} is not a multiple of {self.heads} heads: give head_dim",
                    field="model.head_dim",
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        _positive(self.head_dim, "model.head_dim")
        if self.moe is not None and self.moe.first_dense_layers >= self.layers:
            raise InputError(
                f"first_dense_layers {self.moe.first_dense_layers} leaves no MoE layer of {self.layers}",
                field="model.moe.first_dense_layers",
            )

    # -- structure -------------------------------------------------------------------------------
    def is_moe_layer(self, layer: int) -> bool:
        m = self.moe
        return m is not None and layer >= m.first_dense_layers and (layer - m.first_dense_layers) % m.layer_step == 0

    @property
    def moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    # -- parameter counts --------------------------------------------------------------------------
    def norm_params(self) -> int:
        return 2 * self.hidden if self.bias else self.hidden

    def attention_params(self) -> int:
        h, H, K, dh = self.hidden, self.heads, self.kv_heads, self.head_dim
        if self.mla is not None:
            a = self.mla
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            q = h * H * qk if a.q_lora_rank == 0 else h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * H * qk
            kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
            kv += a.kv_lora_rank * H * (a.qk_nope_head_dim + a.v_head_dim)
            return q + kv + H * a.v_head_dim * h
        weights = 2 * h * H * dh + 2 * h * K * dh
        return weights + (H * dh + 2 * K * dh + h if self.bias else 0)

    def ffn_params(self, size: int) -> int:
        h = self.hidden
        if self.gated_ffn:
            return 3 * h * size + (2 * size + h if self.bias else 0)
        return 2 * h * size + (size + h if self.bias else 0)

    def layer_params(self, layer: int, *, active: bool = False) -> int:
        """Parameters of one layer (``active``: those one token uses)."""
        common = self.attention_params() + 2 * self.norm_params()
        if not self.is_moe_layer(layer):
            return common + self.ffn_params(self.ffn)
        m = self.moe
        routed = m.top_k if active else m.experts
        return common + (routed + m.shared_experts) * self.ffn_params(m.expert_ffn) + self.hidden * m.experts

    def layer_expert_params(self, layer: int) -> int:
        """The routed experts' parameters of one layer (sharded by expert parallelism); 0 if dense."""
        return self.moe.experts * self.ffn_params(self.moe.expert_ffn) if self.is_moe_layer(layer) else 0

    def input_embedding_params(self) -> int:
        return self.vocab * self.hidden + (self.seq_len * self.hidden if self.learned_positions else 0)

    def output_params(self) -> int:
        """Final norm and output head (0 for the head when tied to the input embedding)."""
        return self.norm_params() + (0 if self.tied_embeddings else self.vocab * self.hidden)

    def total_params(self) -> int:
        layers = sum(self.layer_params(i) for i in range(self.layers))
        return self.input_embedding_params() + layers + self.output_params()

    def active_params(self) -> int:
        """Parameters one token uses (MoE: ``top_k`` routed experts plus the shared ones)."""
        layers = sum(self.layer_params(i, active=True) for i in range(self.layers))
        return self.input_embedding_params() + layers + self.output_params()

    def matmul_active_params(self) -> int:
        """Active parameters whose multiply-adds a token runs: the active ones less the lookups
        (input embedding unless tied to the head, learned positions)."""
        lookups = self.seq_len * self.hidden if self.learned_positions else 0
        if not self.tied_embeddings:
            lookups += self.vocab * self.hidden
        return self.active_params() - lookups

    def attention_width(self) -> float:
        """``H * (d_qk + d_v) / 2``: the width that the score and value products of attention run
        at (``h`` for standard attention with ``H * dh = h``)."""
        if self.mla is not None:
            a = self.mla
            return self.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim) / 2
        return float(self.heads * self.head_dim)
