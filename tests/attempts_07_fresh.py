"""A fresh student's own attempts at notebook 07 (Block, GPT, generate): written from the
student notebook and the checks' messages alone. Each has the check call the student ran,
the code of their cell, and what its feedback must be: for a wrong attempt the keys of the
mistakes its failing checks may name (expect), for a right one that every check passes
(correct=True). An attempt whose cause no check names yet has expect=[] and says why in
unnamed. tests/test_attempts_07_fresh.py runs them and prints the counts."""

# a GPT attempt builds the given Block
GIVEN = "Block = GivenBlock\n"

ATTEMPTS = [
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B01',
         intended='post-norm: norm after the residual add',
         check_call='check_block(Block, "values")', expect=['post_norm'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        x = self.ln2(x + self.mlp(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B02',
         intended='normalises the residual stream itself (x = ln1(x) first)',
         check_call='check_block(Block, "values")', expect=['residual_after_norm'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = self.ln1(x)
        x = x + self.attn(x)
        x = self.ln2(x)
        x = x + self.mlp(x)
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B03',
         intended='ln1 and ln2 swapped',
         check_call='check_block(Block, "values")', expect=['norms_swapped'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln2(x))
        x = x + self.mlp(self.ln1(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B04',
         intended='no residual around attention',
         check_call='check_block(Block, "values")', expect=['no_attention_residual'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B05',
         intended='no residual around the MLP',
         check_call='check_block(Block, "values")', expect=['no_mlp_residual'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B06',
         intended='parallel branches: MLP reads ln2 of the original x',
         check_call='check_block(Block, "values")', expect=['parallel_branches'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        return x + self.attn(self.ln1(x)) + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B07',
         intended='ln1 used for both branches',
         check_call='check_block(Block, "values")', expect=['mlp_norm_ln1'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln1(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B08',
         intended='forgot ln2 on the MLP branch',
         check_call='check_block(Block, "values")', expect=['mlp_not_normalised'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(x)
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B09',
         intended='no layer norms at all',
         check_call='check_block(Block, "values")', expect=['no_norm'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B10',
         intended='MLP first, then attention',
         check_call='check_block(Block, "values")', expect=['branches_swapped'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.mlp(self.ln2(x))
        x = x + self.attn(self.ln1(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B11',
         intended='F.dropout with default training=True on the branch outputs',
         check_call='check_block(Block, "eval")', expect=['not_repeatable'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        p = self.attn.attn_dropout.p
        x = x + F.dropout(self.attn(self.ln1(x)), p)
        x = x + F.dropout(self.mlp(self.ln2(x)), p)
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B12',
         intended='forces training mode inside forward',
         check_call='check_block(Block, "eval")', expect=['not_repeatable'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        self.attn.train()
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B13',
         intended='returns only the branch outputs (no x)',
         check_call='check_block(Block, "values")', expect=['no_attention_residual'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        h = self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B14',
         intended='fresh nn.LayerNorm built inside forward (ignores the loaded ln weights)',
         check_call='check_block(Block, "values")', expect=['norm_without_weights'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        C = x.shape[-1]
        x = x + self.attn(nn.LayerNorm(C)(x))
        x = x + self.mlp(nn.LayerNorm(C)(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B15',
         intended='F.layer_norm without the learned weight and bias',
         check_call='check_block(Block, "values")', expect=['norm_without_weights'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        C = x.shape[-1]
        x = x + self.attn(F.layer_norm(x, (C,)))
        x = x + self.mlp(F.layer_norm(x, (C,)))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B16',
         intended='hand-written norm over the time dimension (dim=1)',
         check_call='check_block(Block, "causal")', phrase='not causal',
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        def norm(ln, t):
            t = (t - t.mean(1, keepdim=True)) / (t.var(1, keepdim=True, unbiased=False) + ln.eps).sqrt()
            return t * ln.weight + ln.bias
        x = x + self.attn(norm(self.ln1, x))
        return x + self.mlp(norm(self.ln2, x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B17',
         intended='hand-written norm with unbiased std (torch.std default)',
         check_call='check_block(Block, "values")', expect=['norm_unbiased'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        def norm(ln, t):
            t = (t - t.mean(-1, keepdim=True)) / (t.std(-1, keepdim=True) + ln.eps)
            return t * ln.weight + ln.bias
        x = x + self.attn(norm(self.ln1, x))
        return x + self.mlp(norm(self.ln2, x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B18',
         intended='MLP branch reads ln2 of the original x (h not used)',
         check_call='check_block(Block, "values")', expect=['parallel_branches'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B19',
         intended="in-place += on the input (mutates caller's tensor, breaks backward)",
         check_call='check_block(Block, "output")', expect=['input_mutation'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x += self.attn(self.ln1(x))
        x += self.mlp(self.ln2(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B20',
         intended='detach on the attention branch (forward ok, no gradient to attn)',
         check_call='check_block(Block, "eval")', expect=['gradient_blocked'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x)).detach()
        return x + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B21',
         intended='extra final norm: returns ln2 of the output',
         check_call='check_block(Block, "values")', expect=['extra_final_norm'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.ln2(x)
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B22',
         intended='forgot the return',
         check_call='check_block(Block, "output")', phrase='forget the `return`',
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B23',
         intended='forces eval mode on attn inside forward (dropout never trains)',
         check_call='check_block(Block, "eval")', expect=['dropout_never_trains'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        self.attn.eval()
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B24',
         intended='second residual added to the normalised x (h = ln2(x); x = h + mlp(h))',
         check_call='check_block(Block, "values")', expect=['mlp_residual_after_norm'],
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        h = self.ln2(x)
        return h + self.mlp(h)
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B_c1',
         intended='loop over (norm, branch) pairs',
         check_call='check_block(Block, "eval")', correct=True,
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        for norm, branch in ((self.ln1, self.attn), (self.ln2, self.mlp)):
            x = x + branch(norm(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B_c2',
         intended='F.layer_norm with ln weights + torch.add chain',
         check_call='check_block(Block, "eval")', correct=True,
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        C = x.shape[-1]
        a = F.layer_norm(x, (C,), self.ln1.weight, self.ln1.bias, self.ln1.eps)
        x = torch.add(x, self.attn(a))
        return torch.add(x, self.mlp(F.layer_norm(x, (C,), self.ln2.weight, self.ln2.bias, self.ln2.eps)))
'''),
    dict(notebook='07_transformer_block', exercise='Block', id='fresh-B_ok',
         intended='plain solution (baseline): reference-style correct',
         check_call='check_block(Block, "eval")', correct=True,
         code='''
class Block(nn.Module):
    """A pre-norm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, C, n_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, n_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G01',
         intended='no position embeddings',
         check_call='check_gpt(GPT, "values")', expect=['no_positions'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        x = self.token_embedding(idx)
        x = self.blocks(x)
        return self.lm_head(self.ln_f(x))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G02',
         intended='positions added after the blocks',
         check_call='check_gpt(GPT, "values")', expect=['positions_after_attention'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.blocks(self.token_embedding(idx))
        x = x + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(x))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G03',
         intended='positions for the whole block_size, not T',
         check_call='check_gpt(GPT, "output")', expect=['positions_not_sliced'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        pos = torch.arange(self.block_size, device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G04',
         intended='concatenates token and position embeddings',
         check_call='check_gpt(GPT, "output")', expect=['embeddings_concatenated'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        pos = self.position_embedding(torch.arange(T, device=idx.device)).expand(B, T, -1)
        x = torch.cat([self.token_embedding(idx), pos], dim=-1)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G05',
         intended='forgot ln_f',
         check_call='check_gpt(GPT, "values")', expect=['no_final_norm'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.blocks(x))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G06',
         intended='ln_f applied after lm_head',
         check_call='check_gpt(GPT, "output")', expect=['final_norm_after_head'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.ln_f(self.lm_head(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G07',
         intended='returns softmax probabilities instead of logits',
         check_call='check_gpt(GPT, "values")', expect=['probabilities'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return torch.softmax(self.lm_head(self.ln_f(self.blocks(x))), dim=-1)
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G08',
         intended='position embedding looked up with the token ids',
         check_call='check_gpt(GPT, "values")', expect=['positions_from_ids'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        x = self.token_embedding(idx) + self.position_embedding(idx)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G09',
         intended='positions counted backwards',
         check_call='check_gpt(GPT, "values")', expect=['positions_reversed'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(T - 1, -1, -1, device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G10',
         intended='positions start at 1 (off by one)',
         check_call='check_gpt(GPT, "values")', expect=['positions_from_one'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(1, T + 1, device=idx.device) % self.block_size
        x = self.token_embedding(idx) + self.position_embedding(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G11',
         intended='loop over blocks without updating x',
         check_call='check_gpt(GPT, "values")', expect=['last_block_only'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        for block in self.blocks:
            h = block(x)
        return self.lm_head(self.ln_f(h))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G12',
         intended='only the first block runs',
         check_call='check_gpt(GPT, "values")', expect=['first_block_only'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(self.blocks[0](x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G13',
         intended='ln_f before the blocks instead of after',
         check_call='check_gpt(GPT, "values")', expect=['final_norm_first'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.blocks(self.ln_f(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G14',
         intended='embeddings scaled by sqrt(C) as in the original transformer',
         check_call='check_gpt(GPT, "values")', expect=['scaled_embeddings'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        C = self.token_embedding.embedding_dim
        x = self.token_embedding(idx) * C**0.5 + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G15',
         intended='weight tying by hand: logits from token_embedding.weight, lm_head unused',
         check_call='check_gpt(GPT, "values")', expect=['tied_head'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.ln_f(self.blocks(x)) @ self.token_embedding.weight.T
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G16',
         intended="returns only the last position's logits",
         check_call='check_gpt(GPT, "output")', expect=['shape_named'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x)))[:, -1, :]
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G17',
         intended='F.dropout on the embeddings with default training=True',
         check_call='check_gpt(GPT, "causal")', expect=['not_repeatable'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        x = F.dropout(x, 0.1)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G18',
         intended='positions made without device= (only breaks on a GPU)',
         check_call='check_gpt(GPT, "output")', expect=['follows_inputs'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T))
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G19',
         intended='position ids from idx.shape[0] (B) instead of T',
         check_call='check_gpt(GPT, "values")', expect=['positions_per_sequence'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(B, device=idx.device).unsqueeze(1)
        x = self.token_embedding(idx) + self.position_embedding(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G20',
         intended="returns (logits, None) like nanoGPT's (logits, loss)",
         check_call='check_gpt(GPT, "output")', phrase='returned a tuple of 2 items',
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x))), None
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G21',
         intended='position embeddings unsqueezed on the wrong dim ((T, 1, C))',
         check_call='check_gpt(GPT, "output")', expect=['broadcast'], phrase='one tensor has T where the other has B',
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        pos = self.position_embedding(torch.arange(T, device=idx.device)).unsqueeze(1)
        x = self.token_embedding(idx) + pos
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G22',
         intended='ln_f applied twice (once more after lm_head is impossible, so before and after blocks)',
         check_call='check_gpt(GPT, "values")', expect=['final_norm_twice'],
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.ln_f(self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device)))
        return self.lm_head(self.ln_f(self.blocks(x)))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G_c1',
         intended='position rows sliced from the weight table, blocks via functools.reduce',
         check_call='check_gpt(GPT, "values")', correct=True,
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        import functools
        T = idx.shape[-1]
        x = self.token_embedding(idx) + self.position_embedding.weight[:T]
        x = functools.reduce(lambda h, blk: blk(h), self.blocks, x)
        return self.lm_head(self.ln_f(x))
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G_c2',
         intended='positions as (B,T) ids via expand, F.embedding, F.linear',
         check_call='check_gpt(GPT, "values")', correct=True,
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device).expand(B, T)
        x = F.embedding(idx, self.token_embedding.weight) + F.embedding(pos, self.position_embedding.weight)
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln_f(x), self.lm_head.weight, self.lm_head.bias)
'''),
    dict(notebook='07_transformer_block', exercise='GPT', id='fresh-G_ok',
         intended='plain solution (baseline): correct',
         check_call='check_gpt(GPT, "values")', correct=True,
         code=GIVEN + '''
class GPT(nn.Module):
    """A tiny GPT: (B, T) character ids -> (B, T, vocab_size) logits for the next character."""

    def __init__(self, vocab_size, C, n_heads, n_layers, block_size, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, C)
        self.position_embedding = nn.Embedding(block_size, C)
        self.blocks = nn.Sequential(*[Block(C, n_heads, block_size, dropout) for _ in range(n_layers)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        x = self.blocks(x)
        return self.lm_head(self.ln_f(x))
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N01',
         intended='no crop: the whole context goes to the model',
         check_call='check_generate(generate, "output")', expect=['context_not_cropped'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx)[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N02',
         intended='crops to the FIRST block_size tokens',
         check_call='check_generate(generate, "cropped")', expect=['cropped_from_the_start'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, :block_size])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N03',
         intended='crop off by one: last block_size - 1 tokens',
         check_call='check_generate(generate, "cropped")', expect=['context_length'], phrase='block_size - 1: the crop is off by one',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -(block_size - 1):])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N04',
         intended='crop off by one: last block_size + 1 tokens',
         check_call='check_generate(generate, "cropped")', expect=['context_length'], phrase='block_size + 1: the crop is off by one',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -(block_size + 1):])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N05',
         intended='temperature divides the probabilities',
         check_call='check_generate(generate, "values")', expect=['temperature_after_softmax'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits, dim=-1) / temperature, num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N06',
         intended='temperature multiplies the logits',
         check_call='check_generate(generate, "values")', expect=['temperature_multiplied'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits * temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N07',
         intended='softmax over dim 0 (the batch)',
         check_call='check_generate(generate, "output")', expect=['softmax_wrong_dim'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=0), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N08',
         intended='logits of the first position',
         check_call='check_generate(generate, "cropped")', expect=['first_position'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, 0, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N09',
         intended='greedy argmax instead of sampling',
         check_call='check_generate(generate, "cropped")', expect=['greedy'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.argmax(logits / temperature, dim=-1, keepdim=True)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N10',
         intended='generator not passed to multinomial',
         check_call='check_generate(generate, "output")', phrase='passing the generator on',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N11',
         intended="all new tokens drawn at once from the prompt's distribution",
         check_call='check_generate(generate, "cropped")', expect=['sampled_at_once'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    logits = model(idx[:, -block_size:])[:, -1, :]
    probs = torch.softmax(logits / temperature, dim=-1)
    new = torch.multinomial(probs, num_samples=max_new_tokens, replacement=True, generator=generator)
    return torch.cat([idx, new], dim=1)
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N12',
         intended='appends along dim 0',
         check_call='check_generate(generate, "output")', expect=['cat_sizes'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=0)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N13',
         intended='feeds only the last token (no context)',
         check_call='check_generate(generate, "cropped")', expect=['last_token_only'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -1:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N14',
         intended='torch.distributions.Categorical (ignores the generator)',
         check_call='check_generate(generate, "output")', phrase='passing the generator on',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.distributions.Categorical(logits=logits / temperature).sample().unsqueeze(1)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N15',
         intended='one token too few (range(max_new_tokens - 1))',
         check_call='check_generate(generate, "output")', phrase='returned shape (2, 17); expected (2, 18) = (B, T + max_new_tokens)',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens - 1):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N16',
         intended='log_softmax fed to multinomial',
         check_call='check_generate(generate, "output")', expect=['sampled_from_logits'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(F.log_softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N17',
         intended='returns only the new tokens',
         check_call='check_generate(generate, "output")', phrase='returned shape (2, 15); expected (2, 18) = (B, T + max_new_tokens)',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    T = idx.shape[1]
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx[:, T:]
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N18',
         intended='temperature applied twice: logits / t then softmax(p / t)',
         check_call='check_generate(generate, "values")', expect=['temperature_twice'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :] / temperature
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N19',
         intended="crop uses the context's own length variable T captured before the loop",
         check_call='check_generate(generate, "cropped")', expect=['context_length'], phrase="the prompt's length T = 3",
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    T = idx.shape[1]
    for _ in range(max_new_tokens):
        logits = model(idx[:, -min(T, block_size):])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N20',
         intended='squeeze makes multinomial return (B,) then unsqueeze(0)',
         check_call='check_generate(generate, "output")', expect=['cat_sizes'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator).squeeze().unsqueeze(0)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N21',
         intended='returns a Python list of lists (tolist)',
         check_call='check_generate(generate, "output")', phrase='returned a list of 2 items; expected a tensor',
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx.tolist()
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N22',
         intended='samples with probs.squeeze() then view(B, 1) (meant as a B=1-only trick, but it is right for every B)',
         check_call='check_generate(generate, "hot")', correct=True,
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        probs = torch.softmax(model(idx[:, -block_size:])[:, -1, :] / temperature, dim=-1).squeeze()
        nxt = torch.multinomial(probs, 1, generator=generator)
        idx = torch.cat([idx, nxt.view(idx.shape[0], 1)], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N23',
         intended='nanoGPT habit: keeps only the top 10 logits before sampling',
         check_call='check_generate(generate, "hot")', expect=['top_k_filter'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :] / temperature
        v, _ = torch.topk(logits, min(10, logits.size(-1)))
        logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
        nxt = torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N24',
         intended='temperature as a power of the probabilities p ** (1/t) (exact in maths)',
         check_call='check_generate(generate, "hot")', correct=True,
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        p = torch.softmax(model(idx[:, -block_size:])[:, -1, :], dim=-1)
        nxt = torch.multinomial(p ** (1.0 / temperature), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N25',
         intended='crop computed from the prompt length: idx[:, -block_size:] taken once before the loop',
         check_call='check_generate(generate, "output")', expect=['context_not_cropped'],
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    ctx = idx[:, -block_size:]
    for _ in range(max_new_tokens):
        logits = model(ctx)[:, -1, :]
        nxt = torch.multinomial(torch.softmax(logits / temperature, dim=-1), num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
        ctx = torch.cat([ctx, nxt], dim=1)
    return idx
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N_c1',
         intended='unnormalised exp(logits/t) to multinomial, preallocated output',
         check_call='check_generate(generate, "hot")', correct=True,
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    B, T = idx.shape
    out = torch.empty(B, T + max_new_tokens, dtype=idx.dtype, device=idx.device)
    out[:, :T] = idx
    for t in range(T, T + max_new_tokens):
        logits = model(out[:, max(0, t - block_size):t])[:, -1]
        w = torch.exp((logits - logits.amax(-1, keepdim=True)) / temperature)
        out[:, t] = torch.multinomial(w, 1, generator=generator)[:, 0]
    return out
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N_c2',
         intended='recursive, softmax via log_softmax().exp() with 1/temperature factor',
         check_call='check_generate(generate, "hot")', correct=True,
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    if max_new_tokens == 0:
        return idx
    factor = 1.0 / temperature
    probs = F.log_softmax(factor * model(idx[..., -block_size:])[:, -1], dim=-1).exp()
    nxt = probs.multinomial(1, generator=generator)
    return generate(model, torch.cat((idx, nxt), -1), max_new_tokens - 1, block_size, temperature, generator)
'''),
    dict(notebook='07_transformer_block', exercise='generate', id='fresh-N_ok',
         intended='plain solution (baseline): correct',
         check_call='check_generate(generate, "hot")', correct=True,
         code='''
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, generator=None):
    """Extend idx (B, T) by max_new_tokens sampled ids: returns (B, T + max_new_tokens)."""
    for _ in range(max_new_tokens):
        logits = model(idx[:, -block_size:])[:, -1, :]
        probs = torch.softmax(logits / temperature, dim=-1)
        nxt = torch.multinomial(probs, num_samples=1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
    return idx
'''),
]
