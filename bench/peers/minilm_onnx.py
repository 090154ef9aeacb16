"""Export all-MiniLM-L6-v2 from its local sentence-transformers folder to the ONNX
folder chromadb's default embedding function reads, so MemPalace runs offline on the
same weights as the others.

chromadb's ``ONNXMiniLM_L6_V2`` downloads ``onnx.tar.gz`` into
``~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx`` unless these six files are there:
``model.onnx`` (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``; first
output the last hidden state, which it mean-pools and normalises itself) and the
tokenizer's files. Run with the project's python (torch, transformers):

    python bench/peers/minilm_onnx.py MODEL_FOLDER OUT_FOLDER
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModel

FILES = ("config.json", "special_tokens_map.json", "tokenizer_config.json", "tokenizer.json")


class Hidden(torch.nn.Module):
    """The encoder's last hidden state, as chromadb's graph returns it."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        out = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return out.last_hidden_state  # type: ignore[no-any-return]


def export(source: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()
    ids = torch.tensor([[101, 7592, 2088, 102], [101, 7592, 102, 0]], dtype=torch.long)
    mask = (ids != 0).long()
    axes = {0: "batch", 1: "tokens"}
    with torch.no_grad():
        torch.onnx.export(
            Hidden(model),
            (ids, mask, torch.zeros_like(ids)),
            str(out / "model.onnx"),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=17,
            dynamo=False,
            do_constant_folding=True,
        )
    for name in (*FILES, "vocab.txt"):
        shutil.copy(source / name, out / name)


if __name__ == "__main__":
    export(Path(sys.argv[1]), Path(sys.argv[2]))
