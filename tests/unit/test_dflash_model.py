"""The DFlash drafter's training-side model (issue 17), pure: block lengths computed as vLLM runs them,
teacher-forced acceptance arithmetic, the identity value path, attention guidance, the recipe in the drafter's
identity. (Agreement with vLLM's own forward: tests/integration/test_dflash_agreement.py.)"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from orchestrator.drafters.train.dflash_model import teacher_forced, vllm_walk
from orchestrator.drafters.train.dflash_train import RECIPE, DFlashRecipe, build, make_step_fn, prefix_hit_prob
from orchestrator.drafters.train.run import DEFAULT_LR, TrainSettings

from .test_drafter_training import TARGET, synthetic_data, tensors

SHIPPED = DFlashRecipe()


def _model(recipe=SHIPPED, block_size=8, seed=0):
    cfg, model = build(TARGET, recipe, block_size, synthetic_data(), tensors(), seed)
    with torch.no_grad():  # weights large enough that every slot's output depends on what it attends to
        for name, p in model.named_parameters():
            if name.endswith("proj.weight"):
                p.normal_(0, 0.3)
        model.mask_embedding.normal_(0, 0.5)
    return cfg, model


def test_a_short_block_inside_a_long_one_computes_what_vllm_runs_for_it():
    # vLLM drafts K tokens from a block of exactly K + 1 slots; training packs blocks of several lengths into
    # one padded tensor: the padded slots must be invisible
    _, model = _model(DFlashRecipe(layers=2))
    data = synthetic_data()
    x, f = data["tokens"][0][None], data["features"][0].float()[None]
    anchors = torch.tensor([[7, 12]])
    short = model(x, f, anchors, block_size=4)
    packed = model(x, f, anchors, block_lens=torch.tensor([[4, 4]]), block_size=8)
    assert torch.allclose(packed[:, :, :4], short, atol=1e-5)
    unmasked = model(x, f, anchors, block_size=8)  # the same slots with the padding visible differ
    assert not torch.allclose(unmasked[:, :, :4], short, atol=1e-3)


def test_blocks_run_by_length_give_the_padded_forwards_states_with_the_gradient():
    # training runs each block only as long as it is (forward_by_length); it must compute exactly what the
    # padded forward (and so vLLM's block of K + 1) computes, for every block, in any order of lengths per row
    _, model = _model(DFlashRecipe(layers=2), block_size=8)
    model = model.double()  # float64: the two orders of summation then agree to rounding, gradients included
    data = synthetic_data()
    x = torch.stack([data["tokens"][0][:20], data["tokens"][1][:20]])
    f = torch.stack([data["features"][0][:20].double(), data["features"][1][:20].double()])
    anchors = torch.tensor([[7, 12, 3, 9, 15], [4, 5, 16, 8, 11]])
    lens = torch.tensor([[4, 8, 4, 2, 8], [8, 8, 2, 4, 8]])  # rows hold different counts of each length
    padded = model(x, f, anchors, block_lens=lens, block_size=8)
    by_length = model.forward_by_length(x, f, anchors, lens, block_size=8)
    exists = torch.arange(8)[None, None] < lens[:, :, None]
    assert torch.allclose(by_length[exists], padded[exists], atol=1e-10)
    assert (by_length[~exists] == 0).all()
    w = torch.randn(padded[exists].shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    g1 = torch.autograd.grad((padded[exists] * w).sum(), model.fc.weight)[0]
    g2 = torch.autograd.grad((by_length[exists] * w).sum(), model.fc.weight)[0]
    assert g1.abs().max() > 0
    assert torch.allclose(g1, g2, atol=1e-10)


def test_the_last_layer_computes_only_the_slots_that_get_a_loss_and_they_are_unchanged():
    # training asks forward_by_length for slots 0..loss_max_slot only: the last layer then computes no query,
    # attention output or MLP for later slots, which must still act as keys and values (in every layer), so
    # the slots it returns are exactly the full pass's, gradients included
    _, model = _model(DFlashRecipe(layers=2), block_size=8)
    model = model.double()
    data = synthetic_data()
    x = torch.stack([data["tokens"][0][:20], data["tokens"][1][:20]])
    f = torch.stack([data["features"][0][:20].double(), data["features"][1][:20].double()])
    anchors = torch.tensor([[7, 12, 3, 9, 15], [4, 5, 16, 8, 11]])
    lens = torch.tensor([[4, 8, 4, 2, 8], [8, 8, 2, 4, 8]])
    full = model.forward_by_length(x, f, anchors, lens, block_size=8)
    cut = model.forward_by_length(x, f, anchors, lens, block_size=8, max_slot=2)
    kept = (torch.arange(8)[None, None] < lens[:, :, None]) & (torch.arange(8)[None, None] <= 2)
    assert torch.allclose(cut[kept], full[kept], atol=1e-10)
    assert (cut[~kept] == 0).all() and (full[~kept & (torch.arange(8)[None, None] < lens[:, :, None])] != 0).any()
    # slots 3..7 matter to slots 0..2 (they are keys): dropping them from the block changes slot 1
    short = model.forward_by_length(x, f, anchors, torch.full_like(lens, 3), block_size=8)
    longer = lens > 3
    assert not torch.allclose(short[longer][:, 1], full[longer][:, 1], atol=1e-6)
    w = torch.randn(full[kept].shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    g_full = torch.autograd.grad((full[kept] * w).sum(), model.layers[1].q_proj.weight)[0]
    g_cut = torch.autograd.grad((cut[kept] * w).sum(), model.layers[1].q_proj.weight)[0]
    assert g_full.abs().max() > 0
    assert torch.allclose(g_full, g_cut, atol=1e-10)


def test_the_training_step_runs_blocks_by_length_without_guidance():
    # the shipped recipe (no guidance) trains through forward_by_length; its loss equals the padded pass's
    recipe = replace(RECIPE, anchors_per_seq=6, draft_vocab=None, block_lens=(4, 8))
    _, model = _model(recipe, block_size=8)
    data = synthetic_data()
    step = make_step_fn(model, data, recipe, 8)
    calls = []
    orig = model.forward_by_length
    model.forward_by_length = lambda *a, **k: calls.append(1) or orig(*a, **k)
    loss_by_length = step([0, 1], torch.Generator().manual_seed(3))[0]
    assert calls
    model.forward_by_length = lambda tokens, feats, anchors, lens, block_size, ctx_extra, max_slot: model(
        tokens, feats, anchors, lens, block_size=block_size, ctx_extra=ctx_extra)
    loss_padded = step([0, 1], torch.Generator().manual_seed(3))[0]
    assert abs(float(loss_by_length) - float(loss_padded)) < 1e-4


class _Oracle:
    """A stand-in drafter that drafts the right token in the given slots (0-based) and a wrong one elsewhere."""

    def __init__(self, right: set[int]):
        self.right, self.draft_ids = right, None

    def eval(self):
        pass

    def train(self):
        pass

    def __call__(self, tokens, feats, anchors, block_size):
        self.tokens, self.anchors = tokens[0], anchors[0]
        return torch.zeros(1, anchors.shape[1], block_size, 1)

    def logits(self, states):
        A, K = states.shape[0], states.shape[1]
        out = torch.zeros(A, K, 200)
        for a, p in enumerate(self.anchors.tolist()):
            for j in range(K):
                pos = p + 1 + j
                tok = int(self.tokens[pos]) if pos < len(self.tokens) else 0
                out[a, j, tok if j in self.right else (tok + 1) % 200] = 1.0
        return out

    def to_target_ids(self, pred):
        return pred


def test_teacher_forced_acceptance_counts_the_bonus_token_and_stops_at_the_first_miss():
    data = {"tokens": [torch.arange(100, 110)], "prompt_lens": [4], "features": [torch.zeros(10, 3)]}
    # anchors p = 4..8 (the answer from p = 4, one label at least); K = 3; the sequence ends at 9
    r = teacher_forced(_Oracle(right={0}), data, [0], K=3)
    assert r["blocks"] == 5 and r["al"] == pytest.approx(2.0)  # 1 accepted + the bonus token, every block
    assert r["accept_by_pos"] == pytest.approx([1.0, 0.0, 0.0])
    r = teacher_forced(_Oracle(right={0, 1, 2}), data, [0], K=3)
    # p = 4, 5, 6 accept 3; p = 7 has 2 tokens left, p = 8 one: AL = 1 + (3 + 3 + 3 + 2 + 1) / 5
    assert r["al"] == pytest.approx(1 + 12 / 5)
    assert r["accept_by_pos"] == pytest.approx([1.0, 4 / 5, 3 / 5])
    r = teacher_forced(_Oracle(right={0, 2}), data, [0], K=3)  # a right third draft after a miss is not accepted
    assert r["al"] == pytest.approx(2.0) and r["accept_by_pos"] == pytest.approx([1.0, 0.0, 0.0])
    assert r["slot_acc"] == pytest.approx([1.0, 0.0, 1.0])  # ... though the slot itself was right


def test_teacher_forced_walk_drafts_where_vllm_drafts_next():
    data = {"tokens": [torch.arange(100, 110)], "prompt_lens": [4], "features": [torch.zeros(10, 3)]}
    r = teacher_forced(_Oracle(right={0}), data, [0], K=3)  # one accepted + bonus: anchors 4, 6, 8
    assert r["steps"] == 3 and r["al_walk"] == pytest.approx(2.0)
    r = teacher_forced(_Oracle(right={0, 1, 2}), data, [0], K=3)  # 4 accepts 3 -> 8 accepts the 1 left
    assert r["steps"] == 2 and r["al_walk"] == pytest.approx((4 + 2) / 2)
    assert r["al"] == pytest.approx(1 + 12 / 5)  # every position: the easy stretch counted at each of its 5


def test_vllm_walk_crosses_an_easy_stretch_in_one_step():
    accepted = {0: 3, 1: 3, 2: 3, 3: 3, 4: 0, 5: 0, 6: 0, 7: 0}
    assert vllm_walk(accepted, 0, 7) == [0, 4, 5, 6, 7]
    walk = [1 + accepted[p] for p in vllm_walk(accepted, 0, 7)]
    assert sum(walk) / len(walk) == pytest.approx(8 / 5)  # what vLLM's counters report: 8 tokens in 5 steps
    assert sum(1 + a for a in accepted.values()) / len(accepted) == pytest.approx(2.5)  # the per-position mean


def test_identity_value_path_and_full_width_kv_heads():
    cfg, model = build(TARGET, DFlashRecipe(value_init="identity"), 8, synthetic_data(), tensors(), 0)
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"]
    layer = model.layers[0]
    assert torch.equal(layer.v_proj.weight, torch.eye(32)) and torch.equal(layer.o_proj.weight, torch.eye(32))
    with pytest.raises(ValueError, match="kv_heads x head_dim"):
        build(TARGET, DFlashRecipe(value_init="identity", kv_heads=2), 8, synthetic_data(), tensors(), 0)


def _attention_on_previous(recipe, steps=25):
    torch.manual_seed(0)
    cfg, model = build(TARGET, recipe, 8, synthetic_data(), tensors(), 0)
    data = synthetic_data()
    step = make_step_fn(model, data, recipe, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for i in range(steps):
        loss, *_ = step([0, 1, 2, 3], torch.Generator().manual_seed(i))
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = torch.stack([t[:20] for t in data["tokens"][:4]])
    f = torch.stack([t[:20].float() for t in data["features"][:4]])
    with torch.no_grad():
        _, (w_prev, _) = model(x, f, torch.full((4, 3), 10), block_size=8, guide=True)
    return float(w_prev[:, : w_prev.shape[1] // 3, :, 1:].mean())


def test_intermediate_size_sets_the_drafters_mlp_width_and_leaves_old_keys_alone():
    cfg, model = build(TARGET, DFlashRecipe(intermediate_size=24), 8, synthetic_data(), tensors(), 0)
    assert cfg["intermediate_size"] == 24  # config.json carries it: vLLM builds its MLP from that
    assert model.layers[0].gate_proj.weight.shape == (24, cfg["hidden_size"])
    default_cfg, _ = build(TARGET, DFlashRecipe(), 8, synthetic_data(), tensors(), 0)
    assert default_cfg["intermediate_size"] == TARGET["intermediate_size"]  # None: the target's width
    assert "intermediate_size" not in DFlashRecipe().describe()  # at its default: every cached drafter's key holds
    assert DFlashRecipe(intermediate_size=24).describe()["intermediate_size"] == 24


def test_attention_guidance_pulls_heads_to_the_freshest_context_state():
    base = DFlashRecipe(anchors_per_seq=8)
    assert _attention_on_previous(replace(base, guide=1.0)) > 2 * _attention_on_previous(base)


def test_the_recipe_and_learning_rate_are_part_of_the_drafter_identity(monkeypatch):
    from orchestrator.drafters.train import dflash_train

    s = TrainSettings(method="dflash")
    assert s.lr == DEFAULT_LR["dflash"] and TrainSettings(method="eagle3").lr == DEFAULT_LR["eagle3"]
    before = s.key()
    monkeypatch.setattr(dflash_train, "RECIPE", replace(RECIPE, guide=RECIPE.guide + 1.0))
    assert TrainSettings(method="dflash").key() != before  # a changed recipe never reuses an old drafter
    assert TrainSettings(method="dflash").data_key() == s.data_key()  # ... but reuses the data


def test_slots_past_loss_max_slot_get_no_logits_and_no_loss():
    # the vocabulary projection is most of a training step: slots whose loss weight is negligible are skipped
    data = synthetic_data()
    recipe = DFlashRecipe(anchors_per_seq=8, loss_decay=None)
    _, model = _model(recipe)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731  the same batch for both
    full_loss, _, full_accs, _ = make_step_fn(model, data, recipe, 8)([0, 1, 2, 3], g())
    cut_loss, _, cut_accs, _ = make_step_fn(model, data, replace(recipe, loss_max_slot=2), 8)([0, 1, 2, 3], g())
    assert all(a == a for a in full_accs)  # every slot 1..7 labelled and scored
    assert cut_accs[:2] == full_accs[:2] and all(a != a for a in cut_accs[2:])  # slots 3..7: no logits (NaN)
    assert not torch.isclose(cut_loss, full_loss)  # ... and out of the loss


def test_accept_weight_is_the_probability_that_every_earlier_slot_is_right():
    # two blocks of 4 slots (slot 0 the anchor, never trained); block 0 has its last slot unlabelled
    m = torch.tensor([[[False, True, True, False], [False, True, True, True]]])
    target = torch.tensor([0, 1, 2, -1, 0])  # block 1, slot 2: outside the draft vocabulary (never right)
    p_right = torch.tensor([0.5, 0.25, 0.8, 0.9, 0.7])
    logits = torch.full((5, 3), -1e4)
    for row, (t, p) in enumerate(zip(target.tolist(), p_right.tolist())):
        if t >= 0:  # p on the right token, the rest spread over the others
            logits[row] = torch.log(torch.full((3,), (1 - p) / 2))
            logits[row, t] = torch.log(torch.tensor(p))
    w = prefix_hit_prob(logits, target, m)
    assert torch.allclose(w, torch.tensor([1.0, 0.5, 1.0, 0.8, 0.0]), atol=1e-5)
    assert not w.requires_grad


def test_accept_weight_changes_the_loss_only_past_slot_1():
    data = synthetic_data()
    recipe = DFlashRecipe(anchors_per_seq=8, loss_decay=None, loss_max_slot=1)
    _, model = _model(recipe)
    g = lambda: torch.Generator().manual_seed(3)  # noqa: E731
    plain, *_ = make_step_fn(model, data, recipe, 8)([0, 1, 2, 3], g())
    weighted, *_ = make_step_fn(model, data, replace(recipe, accept_weight=True), 8)([0, 1, 2, 3], g())
    assert torch.isclose(plain, weighted)  # slot 1 alone: every weight is 1
    plain, *_ = make_step_fn(model, data, replace(recipe, loss_max_slot=None), 8)([0, 1, 2, 3], g())
    weighted, *_ = make_step_fn(model, data, replace(recipe, loss_max_slot=None, accept_weight=True), 8)(
        [0, 1, 2, 3], g())
    assert not torch.isclose(plain, weighted)
