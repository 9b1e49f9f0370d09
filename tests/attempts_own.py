"""Wrong attempts written as a learner would, one mistake family each, for the diagnosis
tests. code: the solution cell; expect: the finding keys (catalogue or grader.checks.diagnosis)
that name the mistake; a check naming anything else is misleading."""

ATTEMPTS = [
    # --- 01 ---------------------------------------------------------------------------
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-inplace-loop",
         intended="running means written into x itself", expect=["input_mutation"], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    for b in range(B):
        for t in range(T):
            x[b, t] = x[b, : t + 1].mean(0)
    return x
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-zeros-no-dtype",
         intended="output buffer created without dtype/device", expect=["follows_inputs"], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros(B, T, C)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(0)
    return xbow
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-global-T",
         intended="loops over the notebook's T", expect=["global_size"], code='''
def bag_of_words_loop(x):
    xbow = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(0)
    return xbow
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-cumsum-broadcast",
         intended="counts shaped (T,) instead of (T, 1)", expect=["broadcast", "shortcut"], code='''
def bag_of_words_loop(x):
    T = x.shape[1]
    counts = torch.arange(1, T + 1, dtype=x.dtype)
    return x.cumsum(1) / counts
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-cumsum-shortcut",
         intended="skips the loop with cumsum", expect=["shortcut"], code='''
def bag_of_words_loop(x):
    T = x.shape[1]
    counts = torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(1, T, 1)
    return x.cumsum(1) / counts
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-return-x",
         intended="returns the input", expect=["trivial"], code='''
def bag_of_words_loop(x):
    return x
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-divide-by-T",
         intended="divides every running sum by T", expect=["factor_along_dim"], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].sum(0) / T
    return xbow
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-wrong-mean-dim",
         intended="mean over the channels", expect=["sizes", "broadcast", "reshape_sizes"], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].mean(1)
    return xbow
'''),
    # --- 02 ---------------------------------------------------------------------------
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-no-keepdim",
         intended="row sums without keepdim", expect=["missing_keepdim"], code='''
def running_average_weights(T):
    wei = torch.tril(torch.ones(T, T))
    return wei / wei.sum(1)
'''),
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-divide-arange",
         intended="divides by arange without reshaping to (T, 1)", expect=["missing_keepdim"], code='''
def running_average_weights(T):
    return torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)
'''),
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-weights-divide-by-T",
         intended="divides the tril by T", expect=["factor_along_dim", "not_normalised"], code='''
def running_average_weights(T):
    return torch.tril(torch.ones(T, T)) / T
'''),
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-eye",
         intended="identity weights", expect=["trivial"], code='''
def running_average_weights(T):
    return torch.eye(T)
'''),
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-transposed",
         intended="the weights transposed", expect=["transposed", "weights_transposed"], code='''
def running_average_weights(T):
    wei = torch.tril(torch.ones(T, T))
    return (wei / wei.sum(1, keepdim=True)).T
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-operands-swapped",
         intended="x @ wei", expect=["matmul_sizes"], code='''
def bag_of_words_matmul(x):
    wei = running_average_weights(x.shape[1]).to(x.device, x.dtype)
    return x @ wei
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-float32-weights",
         intended="weights left in float32", expect=["follows_inputs"], code='''
def bag_of_words_matmul(x):
    return running_average_weights(x.shape[1]) @ x
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-weights-transposed",
         intended="wei.T @ x", expect=["weights_transposed"], code='''
def bag_of_words_matmul(x):
    wei = running_average_weights(x.shape[1]).to(x.device, x.dtype)
    return wei.T @ x
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-global-T-matmul",
         intended="weights for the notebook's T", expect=["global_size"], code='''
def bag_of_words_matmul(x):
    wei = running_average_weights(T).to(x.device, x.dtype)
    return wei @ x
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-cumsum-matmul",
         intended="cumsum instead of the matmul", expect=["shortcut"], code='''
def bag_of_words_matmul(x):
    T = x.shape[1]
    return x.cumsum(1) / torch.arange(1, T + 1, dtype=x.dtype, device=x.device).view(T, 1)
'''),
    # --- 03 ---------------------------------------------------------------------------
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-masked-fill-inplace",
         intended="masked_fill_ on the caller's scores", expect=["input_mutation"], code='''
def masked_softmax(scores, mask):
    scores.masked_fill_(mask, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-manual-no-keepdim",
         intended="exp / sum without keepdim", expect=["broadcast"], code='''
def masked_softmax(scores, mask):
    e = scores.exp().masked_fill(mask, 0.0)
    return e / e.sum(-1)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-global-causal-mask",
         intended="uses the notebook's causal mask", expect=["global_tensor"], code='''
def masked_softmax(scores, m):
    wei = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1).nan_to_num(0.0)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-own-causal-mask",
         intended="builds a causal mask instead of using the argument", expect=["always_causal"], code='''
def masked_softmax(scores, mask):
    T = scores.shape[-1]
    hide = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-uniform",
         intended="uniform weights on the visible keys", expect=["trivial"], code='''
def masked_softmax(scores, mask):
    wei = torch.zeros_like(scores).masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1).nan_to_num(0.0)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-mask-plus-causal",
         intended="combines the mask with a causal one", expect=["mask_plus_causal"], code='''
def masked_softmax(scores, mask):
    T = scores.shape[-1]
    hide = mask | torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1).nan_to_num(0.0)
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-tril-scores",
         intended="torch.tril on the scores (zeros, not -inf)", expect=["zero_fill"], code='''
def causal_weights(scores):
    return torch.softmax(torch.tril(scores), dim=-1)
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-mask-shifted",
         intended="triu(2): the next token visible", expect=["mask_offset"], code='''
def causal_weights(scores):
    T = scores.shape[-1]
    hide = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(2)
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-temperature",
         intended="scores divided by sqrt(T)", expect=["scale"], code='''
def causal_weights(scores):
    T = scores.shape[-1]
    hide = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax(scores.masked_fill(hide, float("-inf")) / T ** 0.5, dim=-1)
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-global-T-mask",
         intended="mask built for the notebook's T", expect=["global_size"], code='''
def causal_weights(scores):
    hide = torch.ones(T, T, dtype=torch.bool).triu(1)
    return masked_softmax(scores, hide)
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-cpu-mask",
         intended="mask created without device", expect=["follows_inputs"], code='''
def causal_weights(scores):
    T = scores.shape[-1]
    hide = torch.ones(T, T, dtype=torch.bool).triu(1)
    return masked_softmax(scores, hide)
'''),
    # --- 04 ---------------------------------------------------------------------------
    dict(notebook="04_single_head", exercise="Head", id="own-always-causal",
         intended="causal flag never stored", expect=["always_causal"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-plain-tril",
         intended="mask kept as a plain attribute", expect=["plain_attribute", "follows_inputs"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.tril = torch.tril(torch.ones(block_size, block_size))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-scaled-by-C",
         intended="scores scaled by C ** -0.5", expect=["scale"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        B, T, C = x.shape
        wei = self.query(x) @ self.key(x).transpose(-2, -1) * C ** -0.5
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-returns-weights",
         intended="returns wei instead of wei @ v", expect=["returned_weights"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-global-T-head",
         intended="slices the mask with the notebook's T", expect=["global_size"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-mask-in-forward-cpu",
         intended="mask created in forward without a device", expect=["follows_inputs"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-value-only",
         intended="returns the values without attention", expect=["trivial"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.causal = causal

    def forward(self, x):
        return self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-transpose-0-1",
         intended="k.transpose(0, 1) instead of the last two dims", expect=["matmul_sizes", "sizes", "broadcast"], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(0, 1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    # --- 05 ---------------------------------------------------------------------------
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-scale-T",
         intended="q.shape[1] (T) used as head_size", expect=["scale"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) / q.shape[1] ** 0.5
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-global-head-size",
         intended="the notebook's head_size in the scale", expect=["global_size"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) * head_size ** -0.5
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-always-causal-sdpa",
         intended="always builds a causal mask", expect=["always_causal"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    T = q.shape[-2]
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    hide = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    wei = wei.masked_fill(hide, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-scale-q-inplace",
         intended="q scaled in place", expect=["input_mutation"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    q *= q.shape[-1] ** -0.5
    wei = q @ k.transpose(-2, -1)
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-torch-sdpa",
         intended="torch's own function", expect=["shortcut"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else ~mask)
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-weights-mT",
         intended="wei.mT @ v", expect=["weights_transposed"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1).mT @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-fixed-scale",
         intended="a fixed 1/8 from a tutorial", expect=["scale"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) / 8
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-return-v",
         intended="returns v", expect=["trivial"], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    return v
'''),
    # --- 06 ---------------------------------------------------------------------------
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-shared-head",
         intended="[Head(...)] * n_heads", expect=["shared_module"], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, causal)] * n_heads)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))
'''),
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-cat-time",
         intended="torch.cat along time", expect=["cat_dim"], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, causal) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=1))
'''),
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-stack-interleave",
         intended="stack on the last dim then flatten", expect=["merge_order"], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, causal) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        out = torch.stack([h(x) for h in self.heads], dim=-1)
        return self.proj(out.reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-return-x-mha",
         intended="returns x", expect=["trivial"], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, causal) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        return x
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-merge-no-transpose",
         intended="heads merged without transposing back", expect=["merge_without_transpose"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-view-after-transpose",
         intended=".view after the transpose", expect=["view_after_transpose"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        wei = q @ k.transpose(-2, -1) * self.head_size ** -0.5
        if self.causal:
            wei = wei.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        out = torch.softmax(wei, dim=-1) @ v
        return self.proj(out.transpose(1, 2).view(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-interleaved-split",
         intended="view(B, T, head_size, n_heads)", expect=["split_order"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.head_size, self.n_heads).permute(0, 3, 1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-no-split-transpose",
         intended="view(B, T, n_heads, head_size) without the transpose", expect=["heads_over_time"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-always-causal-mha",
         intended="is_causal=True always", expect=["always_causal"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size = n_heads, head_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-scale-all-heads",
         intended="scaled by 1/(n_heads * head_size)", expect=["scale"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                             scale=1 / (self.n_heads * self.head_size))
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-plain-mask-mha",
         intended="mask kept as a plain attribute", expect=["plain_attribute", "follows_inputs"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.mask = torch.ones(block_size, block_size, dtype=torch.bool).triu(1)

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        wei = q @ k.transpose(-2, -1) * self.head_size ** -0.5
        if self.causal:
            wei = wei.masked_fill(self.mask[:T, :T], float("-inf"))
        out = torch.softmax(wei, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, -1))
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-torch-mha",
         intended="nn.MultiheadAttention", expect=["shortcut"], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.causal = causal
        self.attn = nn.MultiheadAttention(C, n_heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]
'''),
    # --- a second round, written before the analyses that now name them ---------------------

    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-div-t", intended='divides the sum by t (0 at the first token)', expect=['nonfinite_at'], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, : t + 1].sum(0) / t
    return xbow
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-token-mean", intended="each token's mean over its channels", expect=['wrong_dim'], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[b, t].mean()
    return xbow
'''),
    dict(notebook="01_bag_of_words", exercise="bag_of_words_loop", id="own-idx-swapped", intended='batch and time indices swapped', expect=[], code='''
def bag_of_words_loop(x):
    B, T, C = x.shape
    xbow = torch.zeros_like(x)
    for b in range(B):
        for t in range(T):
            xbow[b, t] = x[: t + 1, b].mean(0)
    return xbow
'''),
    dict(notebook="02_tril_matmul", exercise="running_average_weights", id="own-softmax-tril", intended='softmax of tril(ones)', expect=['zero_fill'], code='''
def running_average_weights(T):
    return torch.tril(torch.ones(T, T)).softmax(-1)
'''),
    dict(notebook="02_tril_matmul", exercise="bag_of_words_matmul", id="own-no-norm", intended='tril of ones, not normalised, in the matmul', expect=['running_sum'], code='''
def bag_of_words_matmul(x):
    T = x.shape[1]
    return torch.tril(torch.ones(T, T, dtype=x.dtype, device=x.device)) @ x
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-renorm-nan", intended='softmax, zero the masked, renormalise (0/0 in empty rows)', expect=['nan_fully_masked'], code='''
def masked_softmax(scores, mask):
    w = torch.softmax(scores, -1) * (~mask)
    return w / w.sum(-1, keepdim=True)
'''),
    dict(notebook="03_masked_softmax", exercise="masked_softmax", id="own-where", intended='torch.where after the softmax', expect=['mask_after_softmax'], code='''
def masked_softmax(scores, mask):
    return torch.where(mask, torch.zeros_like(scores), torch.softmax(scores, dim=-1))
'''),
    dict(notebook="03_masked_softmax", exercise="causal_weights", id="own-tril-softmax", intended='scores.tril() then softmax', expect=['zero_fill'], code='''
def causal_weights(scores):
    return scores.tril().softmax(-1)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-weight-matmul", intended='x @ layer.weight without .T', expect=['matmul_sizes'], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        q, k, v = x @ self.query.weight, x @ self.key.weight, x @ self.value.weight
        wei = q @ k.transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-global-headsize-scale", intended="scales by the notebook's head_size", expect=['global_size', 'scale'], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size, bias=False)
        self.key = nn.Linear(C, head_size, bias=False)
        self.value = nn.Linear(C, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1) / head_size ** 0.5
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="04_single_head", exercise="Head", id="own-bias-true", intended='nn.Linear with its bias', expect=['bias'], code='''
class Head(nn.Module):
    def __init__(self, C, head_size, block_size, causal=True):
        super().__init__()
        self.query = nn.Linear(C, head_size)
        self.key = nn.Linear(C, head_size)
        self.value = nn.Linear(C, head_size)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.causal = causal

    def forward(self, x):
        T = x.shape[1]
        wei = self.query(x) @ self.key(x).transpose(-2, -1)
        if self.causal:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return torch.softmax(wei, dim=-1) @ self.value(x)
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-mask-mul-inf", intended='mask.float() * -inf added to the scores', expect=['all_nan'], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if mask is not None:
        wei = wei + mask.float() * float("-inf")
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-scale-v", intended='scale applied to the output', expect=['scale_after_softmax'], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1)
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v * q.shape[-1] ** -0.5
'''),
    dict(notebook="05_scaled_attention", exercise="scaled_dot_product_attention", id="own-sqrt-sum", intended='sqrt of the sum of both head sizes', expect=['scale'], code='''
def scaled_dot_product_attention(q, k, v, mask=None):
    wei = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1] + q.shape[-1])
    if mask is not None:
        wei = wei.masked_fill(mask, float("-inf"))
    return torch.softmax(wei, dim=-1) @ v
'''),
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-heads-in-forward", intended='heads built inside forward', expect=['unregistered'], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.args = (C, head_size, block_size, causal)
        self.n_heads = n_heads
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        heads = [Head(*self.args) for _ in range(self.n_heads)]
        return self.proj(torch.cat([h(x) for h in heads], dim=-1))
'''),
    dict(notebook="06_multi_head", exercise="MultiHeadAttention", id="own-proj-per-head", intended='heads summed, no concatenation or projection', expect=['shape_named'], code='''
class MultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.heads = nn.ModuleList([Head(C, head_size, block_size, causal) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        return sum(h(x) for h in self.heads)
'''),
    dict(notebook="06_multi_head", exercise="BatchedMultiHeadAttention", id="own-single-linear-qkv", intended='never split into heads', expect=['one_wide_head'], code='''
class BatchedMultiHeadAttention(nn.Module):
    def __init__(self, C, n_heads, head_size, block_size, causal=True):
        super().__init__()
        self.n_heads, self.head_size, self.causal = n_heads, head_size, causal
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.query(x), self.key(x), self.value(x)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out)
'''),
]
