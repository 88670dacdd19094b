"""Transformer parameter counts: hand-counted toy models, and the published counts of the zoo."""

from __future__ import annotations

import pytest

from topoopt_ilp.errors import InputError
from topoopt_ilp.jobs.model import MLA, MoE, TransformerModel
from topoopt_ilp.jobs.zoo import LLM_ZOO, PUBLISHED, SOURCES, llm

TOY = dict(name="toy", layers=2, hidden=4, ffn=8, heads=2, vocab=10, seq_len=3)


def test_dense_gqa_toy_by_hand():
    # h 4, 2 heads of dim 2, 1 KV head: q 4*4, k 4*2, v 4*2, out 4*4 = 48; SwiGLU 3*4*8 = 96;
    # two RMSNorms 8 -> 152 per layer. Embedding 40, head 40, final norm 4.
    m = TransformerModel(**TOY, kv_heads=1)
    assert m.head_dim == 2
    assert m.attention_params() == 48
    assert m.layer_params(0) == 152
    assert m.total_params() == 2 * 152 + 40 + 40 + 4 == 388
    assert m.active_params() == 388
    assert m.matmul_active_params() == 388 - 40  # the input embedding is a lookup
    assert m.attention_width() == 4


def test_gpt_style_toy_by_hand():
    # MHA with biases: 4 matrices of 4x4 = 64 + biases 4 + 2*4 + 4 = 80; plain FFN 2*4*8 + 8 + 4 = 76;
    # two LayerNorms with bias 2*8 = 16 -> 172 per layer. Embedding 40 + positions 3*4; tied head; final norm 8.
    m = TransformerModel(**TOY, gated_ffn=False, bias=True, learned_positions=True, tied_embeddings=True)
    assert m.layer_params(1) == 172
    assert m.total_params() == 2 * 172 + 40 + 12 + 8 == 404
    assert m.matmul_active_params() == 404 - 12  # tied: the embedding is the head's matmul; positions are looked up


def test_moe_toy_by_hand():
    # layer 0 dense: 64 + 8 + 96 = 168. Layer 1 MoE: 64 + 8 + (4 routed + 1 shared) * 3*4*2 + router 4*4 = 208;
    # active: 64 + 8 + (2 + 1) * 24 + 16 = 160.
    m = TransformerModel(**TOY, moe=MoE(experts=4, top_k=2, expert_ffn=2, shared_experts=1, first_dense_layers=1))
    assert [m.is_moe_layer(i) for i in range(2)] == [False, True]
    assert m.moe_layers == 1
    assert m.layer_params(0) == 168 and m.layer_params(1) == 208
    assert m.layer_params(1, active=True) == 160
    assert m.layer_expert_params(1) == 96 and m.layer_expert_params(0) == 0
    assert m.total_params() == 84 + 168 + 208 == 460
    assert m.active_params() == 84 + 168 + 160 == 412


def test_moe_layer_step():
    m = TransformerModel(**{**TOY, "layers": 6}, moe=MoE(experts=2, top_k=1, expert_ffn=2, layer_step=2))
    assert [i for i in range(6) if m.is_moe_layer(i)] == [0, 2, 4]


def test_mla_toy_by_hand():
    # q_a 4*3 + norm 3 + q_b 3 * 2*(2+1) = 33; kv_a 4*(2+1) + norm 2 + kv_b 2 * 2*(2+2) = 30; out 2*2*4 = 16.
    mla = MLA(q_lora_rank=3, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2)
    assert TransformerModel(**TOY, mla=mla).attention_params() == 79
    full_q = MLA(q_lora_rank=0, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2)
    assert TransformerModel(**TOY, mla=full_q).attention_params() == 4 * 2 * 3 + 30 + 16
    assert TransformerModel(**TOY, mla=mla).attention_width() == 2 * (2 + 1 + 2) / 2


# Tolerances: the dense models and Mixtral match their published counts within 0.3 %;
# DeepSeek-V3's total within 0.1 %, its active count within 2 % (the stated 37B is rounded;
# MLA's norms and the router are counted in full).
TOLERANCE = {
    "gpt3-175b": (0.005, 0.005),
    "llama3-70b": (0.005, 0.005),
    "llama3.1-405b": (0.005, 0.005),
    "mixtral-8x7b": (0.005, 0.005),
    "deepseek-v3": (0.005, 0.02),
}


@pytest.mark.parametrize("name", sorted(LLM_ZOO))
def test_published_parameter_counts(name):
    m = LLM_ZOO[name]
    total, active = PUBLISHED[name]
    total_tol, active_tol = TOLERANCE[name]
    assert m.total_params() == pytest.approx(total, rel=total_tol)
    assert m.active_params() == pytest.approx(active, rel=active_tol)
    assert name in SOURCES and llm(name) is m


def test_exact_counts_of_the_zoo():
    # Recomputed from the published shapes (pinned so that a change of formula shows).
    assert LLM_ZOO["llama3-70b"].total_params() == 70_553_706_496
    assert LLM_ZOO["llama3.1-405b"].total_params() == 405_853_388_800
    assert LLM_ZOO["mixtral-8x7b"].total_params() == 46_702_792_704
    assert LLM_ZOO["mixtral-8x7b"].active_params() == 12_879_925_248


def test_deepseek_v3_matmul_active_matches_its_weight_notes():
    # deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: 36.6B activated parameters including the 0.9B
    # output head, i.e. without the input embedding, which is what matmul_active_params counts.
    assert LLM_ZOO["deepseek-v3"].matmul_active_params() == pytest.approx(36.6e9, rel=0.005)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(TOY, layers=0), "model.layers"),
        (dict(TOY, kv_heads=3, heads=2), "model.kv_heads"),
        (dict(TOY, hidden=5), "model.head_dim"),
        (dict(TOY, heads=True), "model.heads"),
        (dict(TOY, moe=None, vocab=-1), "model.vocab"),
    ],
)
def test_bad_models(kwargs, field):
    with pytest.raises(InputError) as e:
        TransformerModel(**kwargs)
    assert e.value.field == field


def test_bad_moe():
    with pytest.raises(InputError, match="top_k 3 exceeds the 2 experts"):
        MoE(experts=2, top_k=3, expert_ffn=4)
    with pytest.raises(InputError, match="leaves no MoE layer"):
        TransformerModel(**TOY, moe=MoE(experts=2, top_k=1, expert_ffn=4, first_dense_layers=2))
    with pytest.raises(InputError, match="unknown model"):
        llm("gpt-5")
