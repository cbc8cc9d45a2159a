"""The v1 layout: 4-bit packing, the stored zero - 1, and a checkpoint folder read back."""

import json

import pytest
import torch
from gptq import (
    QuantConfig,
    QuantResult,
    dequantize_v1,
    load_checkpoint,
    pack_int4,
    pack_v1,
    save_checkpoint,
    unpack_int4,
)

pytestmark = pytest.mark.kernels()  # torch code, no Triton kernel


def test_pack_int4_puts_row_8j_plus_t_at_bits_4t(oracles, tol):
    codes = torch.tensor([[1, 15], [2, 0], [3, 0], [4, 0], [5, 0], [6, 0], [7, 0], [8, 0]])  # (8, 2)
    # Hand computation: nibbles 1..8 LSB first = 0x87654321; column 1 holds 15 in the lowest nibble.
    expected = torch.tensor([[0x87654321 - 2**32, 15]], dtype=torch.int32)
    packed = pack_int4(codes)
    assert packed.dtype == torch.int32
    torch.testing.assert_close(packed, expected, **tol("exact"))


def test_pack_int4_sets_the_sign_bit_for_a_top_nibble_of_8_or_more(tol):
    codes = torch.zeros(8, 1, dtype=torch.int64)
    codes[7, 0] = 15  # 0xF0000000 as int32
    torch.testing.assert_close(pack_int4(codes), torch.tensor([[-(2**28)]], dtype=torch.int32), **tol("exact"))


def test_pack_then_unpack_is_the_identity_on_random_codes(oracles, tol):
    codes = torch.randint(0, 16, (64, 24), generator=torch.Generator().manual_seed(0))
    packed = pack_int4(codes)
    torch.testing.assert_close(packed, oracles.pack_words(codes), **tol("exact"))
    torch.testing.assert_close(unpack_int4(packed), codes.to(torch.int32), **tol("exact"))


def _result(n=16, k=64, group=32, seed=0, act=False):
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32)
    scales = torch.rand(k // group, n, generator=g, dtype=torch.float64) * 0.1 + 0.01
    zeros = torch.randint(1, 17, (k // group, n), generator=g, dtype=torch.int32)
    g_idx = (torch.arange(k) // group).to(torch.int32)
    if act:
        g_idx = g_idx[torch.randperm(k, generator=g)]
    weight = scales[g_idx.long()].T * (codes - zeros[g_idx.long()].T)
    return QuantResult(codes, scales, zeros, g_idx, weight)


def test_pack_v1_stores_zero_minus_one_and_matches_the_hand_packed_layout(oracles, tol):
    r = _result(act=True)
    t = pack_v1(r)
    expected = oracles.make_v1(r.codes, r.scales.half(), r.zeros, r.g_idx)
    for key in ("qweight", "qzeros", "scales", "g_idx"):
        torch.testing.assert_close(t[key], expected[key], **tol("exact"))


def test_dequantize_v1_equals_the_weight_up_to_fp16_scales(oracles, tol):
    r = _result(act=True, seed=1)
    t = pack_v1(r)
    w = dequantize_v1(t)
    torch.testing.assert_close(w, oracles.dequant(*(t[k] for k in ("qweight", "qzeros", "scales", "g_idx"))),
                               **tol("exact"))
    torch.testing.assert_close(w.double(), r.weight, **tol("fp16 scales"))


def test_pack_v1_refuses_a_zero_of_0_that_v1_cannot_store():
    r = _result()
    assert set(pack_v1(r)) >= {"qweight", "qzeros", "scales"}  # the same result with zeros >= 1 packs
    zeros = r.zeros.clone()
    zeros[0, 0] = 0  # an asymmetric group of weights all >= 0
    with pytest.raises(ValueError, match="zero"):
        pack_v1(QuantResult(r.codes, r.scales, zeros, r.g_idx, r.weight))


def test_checkpoint_config_and_tensors_read_back(tmp_path, oracles, tol):
    cfg = QuantConfig(4, 32, sym=True, desc_act=True, damp_percent=0.02)
    layers = {"model.layers.0.mlp.up_proj": pack_v1(_result(seed=2, act=True)),
              "model.layers.0.mlp.down_proj": pack_v1(_result(n=8, k=32, seed=3))}
    save_checkpoint(tmp_path / "ckpt", layers, cfg, {"model_type": "llama", "hidden_size": 384})
    raw = json.loads((tmp_path / "ckpt" / "config.json").read_text())  # read here, not by the package
    assert raw["model_type"] == "llama" and raw["hidden_size"] == 384
    assert raw["quantization_config"] == {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True,
                                          "sym": True, "damp_percent": 0.02, "checkpoint_format": "gptq"}
    from safetensors.torch import load_file

    flat = load_file(str(tmp_path / "ckpt" / "model.safetensors"))
    assert set(flat) == {f"{n}.{k}" for n in layers for k in ("qweight", "qzeros", "scales", "g_idx")}
    back, cfg_back = load_checkpoint(tmp_path / "ckpt")
    assert cfg_back == raw
    for name, tensors in layers.items():
        for key, t in tensors.items():
            torch.testing.assert_close(flat[f"{name}.{key}"], t, **tol("exact"))
            torch.testing.assert_close(back[name][key], t, **tol("exact"))
