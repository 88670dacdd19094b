"""The large-language-model zoo: transformers people train now, each from its published configuration.

Every entry cites where its numbers come from; ``PUBLISHED`` holds the parameter counts the
publishers state (total, active per token), which ``tests/jobs/test_zoo.py`` compares with
:meth:`~topoopt_ilp.jobs.model.TransformerModel.total_params` and ``active_params``.
"""

from __future__ import annotations

from topoopt_ilp.errors import InputError
from topoopt_ilp.jobs.model import MLA, MoE, TransformerModel

__all__ = ["LLM_ZOO", "PUBLISHED", "SOURCES", "GLOBAL_BATCH", "llm"]

# GPT-3 175B: Brown et al. 2020, "Language Models are Few-Shot Learners", arXiv 2005.14165, Table 2.1
# (n_layers 96, d_model 12288, n_heads 96, d_head 128, context 2048; FFN 4 x d_model as in GPT-2;
# the GPT-2 BPE vocabulary of 50,257 tokens; learned positions; LayerNorm and biases; the output
# head tied to the token embedding as in GPT-2).
GPT3_175B = TransformerModel(
    name="gpt3-175b",
    layers=96,
    hidden=12288,
    ffn=4 * 12288,
    heads=96,
    vocab=50257,
    seq_len=2048,
    gated_ffn=False,
    bias=True,
    learned_positions=True,
    tied_embeddings=True,
)

# Llama-3 70B: Hugging Face meta-llama/Meta-Llama-3-70B config.json (hidden_size 8192,
# intermediate_size 28672, num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8,
# vocab_size 128256, tie_word_embeddings false); sequence 8192 (Dubey et al. 2024, arXiv 2407.21783,
# pre-training context 8K).
LLAMA3_70B = TransformerModel(
    name="llama3-70b", layers=80, hidden=8192, ffn=28672, heads=64, kv_heads=8, vocab=128256, seq_len=8192
)

# Llama-3.1 405B: Dubey et al. 2024, arXiv 2407.21783, Table 3 (126 layers, model dimension 16,384,
# FFN dimension 53,248, 128 attention heads, 8 key/value heads) and Hugging Face
# meta-llama/Llama-3.1-405B config.json (vocab_size 128256, tie_word_embeddings false); pre-training
# sequence 8192.
LLAMA31_405B = TransformerModel(
    name="llama3.1-405b", layers=126, hidden=16384, ffn=53248, heads=128, kv_heads=8, vocab=128256, seq_len=8192
)

# Mixtral 8x7B: Hugging Face mistralai/Mixtral-8x7B-v0.1 config.json (hidden_size 4096,
# intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8,
# num_local_experts 8, num_experts_per_tok 2, vocab_size 32000, untied); Jiang et al. 2024,
# arXiv 2401.04088 (46.7B total, 12.9B active). Sequence 4096 is a training choice (the context is 32K).
MIXTRAL_8X7B = TransformerModel(
    name="mixtral-8x7b",
    layers=32,
    hidden=4096,
    ffn=14336,
    heads=32,
    kv_heads=8,
    vocab=32000,
    seq_len=4096,
    moe=MoE(experts=8, top_k=2, expert_ffn=14336),
)

# DeepSeek-V3: Hugging Face deepseek-ai/DeepSeek-V3 config.json (hidden_size 7168, intermediate_size
# 18432 for the dense layers, num_hidden_layers 61, first_k_dense_replace 3, n_routed_experts 256,
# n_shared_experts 1, num_experts_per_tok 8, moe_intermediate_size 2048, num_attention_heads 128,
# q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128,
# vocab_size 129280, untied); DeepSeek-AI 2024, arXiv 2412.19437 (671B total, 37B active; sequence
# 4096 in pre-training). The multi-token-prediction module (a 62nd layer, 14B more on the Hub) is
# not part of the 671B and is not modelled.
DEEPSEEK_V3 = TransformerModel(
    name="deepseek-v3",
    layers=61,
    hidden=7168,
    ffn=18432,
    heads=128,
    vocab=129280,
    seq_len=4096,
    moe=MoE(experts=256, top_k=8, expert_ffn=2048, shared_experts=1, first_dense_layers=3),
    mla=MLA(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
)

LLM_ZOO: dict[str, TransformerModel] = {
    m.name: m for m in (GPT3_175B, LLAMA3_70B, LLAMA31_405B, MIXTRAL_8X7B, DEEPSEEK_V3)
}

#: Published (total, active) parameter counts, as the sources above state them.
PUBLISHED: dict[str, tuple[float, float]] = {
    "gpt3-175b": (175e9, 175e9),
    "llama3-70b": (70.6e9, 70.6e9),
    "llama3.1-405b": (405e9, 405e9),
    "mixtral-8x7b": (46.7e9, 12.9e9),
    "deepseek-v3": (671e9, 37e9),
}

SOURCES: dict[str, str] = {
    "gpt3-175b": "Brown et al. 2020, arXiv 2005.14165, Table 2.1",
    "llama3-70b": "Hugging Face meta-llama/Meta-Llama-3-70B config.json; arXiv 2407.21783",
    "llama3.1-405b": "arXiv 2407.21783 Table 3; Hugging Face meta-llama/Llama-3.1-405B config.json",
    "mixtral-8x7b": "Hugging Face mistralai/Mixtral-8x7B-v0.1 config.json; arXiv 2401.04088",
    "deepseek-v3": "Hugging Face deepseek-ai/DeepSeek-V3 config.json; arXiv 2412.19437",
}


#: Global batch (sequences of the model's ``seq_len``) per iteration:
#: GPT-3 175B: 3.2M tokens (arXiv 2005.14165, Table 2.1), rounded to 1536 x 2048 = 3.1M tokens so
#: that it divides by powers of two; Llama-3.1 405B: 16M tokens = 2048 x 8192, its final batch
#: (arXiv 2407.21783, section 3.4.1); Llama-3 70B: the same, an assumption (no batch is published
#: for it); Mixtral 8x7B: 4M tokens = 1024 x 4096, an assumption (none is published);
#: DeepSeek-V3: 15360 sequences of 4096, the batch after its ramp-up (arXiv 2412.19437, section 4.2).
GLOBAL_BATCH: dict[str, int] = {
    "gpt3-175b": 1536,
    "llama3-70b": 2048,
    "llama3.1-405b": 2048,
    "mixtral-8x7b": 1024,
    "deepseek-v3": 15360,
}


def llm(name: str) -> TransformerModel:
    """The zoo model called ``name``."""
    if name not in LLM_ZOO:
        raise InputError(f"unknown model {name!r}; known: {', '.join(LLM_ZOO)}", field="model")
    return LLM_ZOO[name]
