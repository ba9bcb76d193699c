"""Makes the real night's tiny models at image build time (no weights in the repo, no Hub).

  make_model.py OUT_DIR

Writes OUT_DIR/tiny-llama (head_dim 64: serves on vLLM's CPU attention) and
OUT_DIR/tiny-llama-hd16 (head_dim 16: vLLM's CPU attention refuses it at the first request,
so the engine dies while its client prints a result block of zeros). Both share one
byte-level BPE tokenizer. The seed is fixed, so every image built from the same layer holds
the same weights, and two releases are compared on one model.
"""
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
)


def corpus():
    # A few thousand lines of varied ASCII text: enough for a 512-token BPE vocabulary.
    words = (
        "the night shift runs benchmarks of commits on a box with many gpus and the operator "
        "reads results in the morning while the server prints tokens per second latency "
        "throughput prefill decode cache block scheduler engine request model weights"
    ).split()
    for i in range(4000):
        yield " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + f" {i}"


def tokenizer(out):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def model(out, hidden):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
        torch_dtype="bfloat16",
    )
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    tokenizer(out)


if __name__ == "__main__":
    root = sys.argv[1]
    model(os.path.join(root, "tiny-llama"), 256)
    model(os.path.join(root, "tiny-llama-hd16"), 64)
