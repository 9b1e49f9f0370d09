"""Notebook 08's attempts by a learner who saw only the student notebooks and what the checks
print: their own wrong answers (kind "wrong") and right answers written another way
("correct"). Fields: id; exercise (the name in the notebook); idea; code (the solution cell);
check (the focus whose message the learner read); learner (their verdict on that message when
they wrote the attempt); verdict (what the checks give now: named, generic, misleading,
passing, or passes for a right answer); expect (the finding keys that name the real cause:
a visible check naming any other is misleading); phrase (text that the first failing visible
check's message must contain for the attempt to count as named)."""

ATTEMPTS = [
    dict(id='C01', exercise='CachedSelfAttention', kind='wrong', check='values', learner='named', verdict='named',
         idea='cache never cropped',
         expect=['cache_not_cropped'], phrase='the cache not cropped to block_size',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C02', exercise='CachedSelfAttention', kind='wrong', check='values', learner='named', verdict='named',
         idea='cache cropped to its FIRST block_size entries',
         expect=['kept_oldest'], phrase='the cache cropped to its oldest entries',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, :self.block_size]
        self.v_cache = self.v_cache[:, :, :self.block_size]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C03', exercise='CachedSelfAttention', kind='wrong', check='values', learner='generic', verdict='named',
         idea='cache cropped to block_size - 1',
         expect=['cropped_too_short'], phrase='the cache cropped to block_size - 1 entries',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -(self.block_size - 1):]
        self.v_cache = self.v_cache[:, :, -(self.block_size - 1):]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C04', exercise='CachedSelfAttention', kind='wrong', check='output', learner='named', verdict='named',
         idea='cache concatenated along the heads dim',
         expect=['cache_cat_dim'], phrase="the cache extended along the heads' dim",
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=1)
            self.v_cache = torch.cat([self.v_cache, v], dim=1)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C05', exercise='CachedSelfAttention', kind='wrong', check='short', learner='named', verdict='named',
         idea="no mask among the prompt's tokens",
         expect=['no_mask_in_chunk'], phrase='no causal mask among the new tokens',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C06', exercise='CachedSelfAttention', kind='wrong', check='short', learner='named', verdict='named',
         idea='mask without the L - T_new offset (triu on (T_new, L))',
         expect=['top_left_mask'], phrase='the causal mask aligned to the first cached key',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(T_new, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C07', exercise='CachedSelfAttention', kind='wrong', check='short', learner='named', verdict='named',
         idea='no scaling',
         expect=['missing_scale'], phrase='no scale',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C08', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='scaled by C instead of head_size',
         expect=['scale_by_C'], phrase="scores scaled by C ** -0.5, the model's width",
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * C ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C09', exercise='CachedSelfAttention', kind='wrong', check='output', learner='generic', verdict='named',
         idea='forgot the output projection',
         expect=['no_projection'], phrase='not passed through the output projection self.proj',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return out
'''),
    dict(id='C10', exercise='CachedSelfAttention', kind='wrong', check='short', learner='named', verdict='named',
         idea='heads merged without the transpose',
         expect=['merge_without_transpose'], phrase='heads merged without transposing back',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C11', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='heads split with view only, no transpose',
         expect=['split_without_transpose'], phrase='heads split with a view',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, H, T_new, D)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C12', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='softmax over the query dim',
         expect=['softmax_over_queries'], phrase='the softmax taken over the queries (dim=-2)',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-2)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C13', exercise='CachedSelfAttention', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='attends to the new values only (v instead of the cached v)',
         expect=['new_values_only'], phrase='weights applied to the new values only, not the cached ones',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C14', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='scores against the new keys only',
         expect=['new_keys_only'], phrase='scores against the new keys only, not the cached ones',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ k.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C15', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='mask offset off by one (each new token sees one key into the future... of itself)',
         expect=['mask_off_by_one'], phrase='the causal mask shifted by one',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new + 1, L + 1, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C16', exercise='CachedSelfAttention', kind='wrong', check='output', learner='named', verdict='named',
         idea='attends over the old cache first, appends afterwards',
         expect=['appended_after_attention', 'follows_inputs'], phrase='your code mixes devices',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        split = lambda t: t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        K = k if self.k_cache is None else self.k_cache
        V = v if self.v_cache is None else self.v_cache
        L = K.shape[2]
        wei = q @ K.mT * D ** -0.5
        if T_new > 1:
            wei = wei.masked_fill(torch.ones(T_new, L, dtype=torch.bool).triu(1), float("-inf"))
        out = (torch.softmax(wei, -1) @ V).transpose(1, 2).reshape(B, T_new, H * D)
        self.k_cache = k if self.k_cache is None else torch.cat([self.k_cache, k], 2)[:, :, -self.block_size:]
        self.v_cache = v if self.v_cache is None else torch.cat([self.v_cache, v], 2)[:, :, -self.block_size:]
        return self.proj(out)
'''),
    dict(id='C17', exercise='CachedSelfAttention', kind='wrong', check='short', learner='named', verdict='named',
         idea='F.sdpa with is_causal=True for every call',
         expect=['top_left_mask'], phrase='the causal mask aligned to the first cached key',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        split = lambda t: t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        self.k_cache = k if self.k_cache is None else torch.cat([self.k_cache, k], 2)[:, :, -self.block_size:]
        self.v_cache = v if self.v_cache is None else torch.cat([self.v_cache, v], 2)[:, :, -self.block_size:]
        out = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T_new, H * D))
'''),
    dict(id='C18', exercise='CachedSelfAttention', kind='wrong', check='values', learner='named', verdict='named',
         idea='crops before appending (cache ends with block_size + 1)',
         expect=['cropped_before_append'], phrase='the cache cropped before appending (one entry too many)',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache[:, :, -self.block_size:], k], dim=2)
            self.v_cache = torch.cat([self.v_cache[:, :, -self.block_size:], v], dim=2)
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C19', exercise='CachedSelfAttention', kind='wrong', check='output', learner='named', verdict='named',
         idea='mask built with torch.ones(...) without device',
         expect=['follows_inputs'], phrase='your code mixes devices',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        mask = torch.ones(T_new, L, dtype=torch.bool).triu(L - T_new + 1)
        wei = wei.masked_fill(mask, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C20', exercise='CachedSelfAttention', kind='wrong', check='output', learner='named', verdict='named',
         idea='returns (out, cache) like HF past_key_values',
         expect=[], phrase='returned a tuple of 2 items',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out), (self.k_cache, self.v_cache)
'''),
    dict(id='C21', exercise='CachedSelfAttention', kind='wrong', check='short', learner='generic', verdict='named',
         idea='copy-paste: appends k to the value cache',
         expect=['keys_in_value_cache'], phrase='the new keys appended to the value cache',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, k], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C22', exercise='CachedSelfAttention', kind='wrong', check='values', learner='named', verdict='named',
         idea='crop slices the batch dim ([-block_size:] without :, :)',
         expect=['cache_not_cropped'], phrase='the cache not cropped to block_size',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[-self.block_size:]
        self.v_cache = self.v_cache[-self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C23', exercise='CachedSelfAttention', kind='wrong', check='values', learner='passing', verdict='generic',
         idea='mask only for multi-token chunks, aligned as if the cache were empty',
         expect=[], phrase='',  # caught (a chunk after the prompt), its cause not named
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        if T_new > 1:
            wei = wei.masked_fill(torch.ones(T_new, L, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C24', exercise='CachedSelfAttention', kind='wrong', check='values', learner='named', verdict='named',
         idea='crop slices the heads dim ([:, -block_size:])',
         expect=['cache_not_cropped'], phrase='the cache not cropped to block_size',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, -self.block_size:]
        self.v_cache = self.v_cache[:, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='C_c1', exercise='CachedSelfAttention', kind='correct', check='values', learner='passes', verdict='passes',
         idea='additive mask via tril diagonal offset, einsum, cache kept as lists',
         expect=[], phrase='',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        q, k, v = (lin(x).reshape(B, T_new, H, D).permute(0, 2, 1, 3) for lin in (self.query, self.key, self.value))
        ks = [k] if self.k_cache is None else [self.k_cache, k]
        vs = [v] if self.v_cache is None else [self.v_cache, v]
        self.k_cache = torch.cat(ks, -2).narrow(-2, max(0, sum(t.shape[-2] for t in ks) - self.block_size), min(self.block_size, sum(t.shape[-2] for t in ks)))
        self.v_cache = torch.cat(vs, -2)[..., -self.block_size:, :]
        L = self.k_cache.shape[-2]
        bias = torch.zeros(T_new, L, dtype=x.dtype, device=x.device).masked_fill(
            ~torch.ones(T_new, L, dtype=torch.bool, device=x.device).tril(L - T_new), float("-inf"))
        w = torch.einsum("bhqd,bhkd->bhqk", q, self.k_cache) / D ** 0.5 + bias
        out = torch.einsum("bhqk,bhkd->bqhd", w.softmax(-1), self.v_cache).flatten(2)
        return self.proj(out)
'''),
    dict(id='C_ok', exercise='CachedSelfAttention', kind='correct', check='values', learner='passes', verdict='passes',
         idea='plain solution (baseline): correct',
         expect=[], phrase='',
         code='''
class CachedSelfAttention(nn.Module):
    """Causal multi-head attention that remembers past keys and values: (B, T_new, C) -> (B, T_new, C)."""

    def __init__(self, C, n_heads, head_size, block_size):
        super().__init__()
        self.n_heads, self.head_size, self.block_size = n_heads, head_size, block_size
        self.query = nn.Linear(C, n_heads * head_size, bias=False)
        self.key = nn.Linear(C, n_heads * head_size, bias=False)
        self.value = nn.Linear(C, n_heads * head_size, bias=False)
        self.proj = nn.Linear(n_heads * head_size, C)
        self.reset_cache()

    def reset_cache(self):
        self.k_cache = self.v_cache = None  # (B, n_heads, L, head_size) once filled

    def forward(self, x):
        B, T_new, C = x.shape
        H, D = self.n_heads, self.head_size
        def split(t):
            return t.view(B, T_new, H, D).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        if self.k_cache is None:
            self.k_cache, self.v_cache = k, v
        else:
            self.k_cache = torch.cat([self.k_cache, k], dim=2)
            self.v_cache = torch.cat([self.v_cache, v], dim=2)
        self.k_cache = self.k_cache[:, :, -self.block_size:]
        self.v_cache = self.v_cache[:, :, -self.block_size:]
        L = self.k_cache.shape[2]
        wei = q @ self.k_cache.mT * D ** -0.5
        qpos = torch.arange(L - T_new, L, device=x.device).view(-1, 1)
        kpos = torch.arange(L, device=x.device).view(1, -1)
        wei = wei.masked_fill(kpos > qpos, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        out = (wei @ self.v_cache).transpose(1, 2).reshape(B, T_new, H * D)
        return self.proj(out)
'''),
    dict(id='O01', exercise='online_softmax', kind='wrong', check='values', learner='named', verdict='named',
         idea='m starts at 0 instead of -inf',
         expect=['max_started_at_zero'], phrase='the running maximum started at 0',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], 0.0, dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O02', exercise='online_softmax', kind='wrong', check='rows_sum_to_one', learner='named', verdict='named',
         idea='l not rescaled when the maximum changes',
         expect=['sum_not_rescaled'], phrase='the running sum not rescaled when the maximum changes',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O03', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea='rescale factor with the wrong sign exp(m_new - m)',
         expect=['rescale_inverted'], phrase='rescaled by exp(m_new - m) instead of exp(m - m_new)',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(safe - m) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O04', exercise='online_softmax', kind='wrong', check='values', learner='named', verdict='named',
         idea='no torch.where guard: exp(-inf - -inf) = nan for rows starting hidden',
         expect=['masked_prefix_nan'], phrase='scores of -inf at the start of a row give NaN',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = m_new
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O06', exercise='online_softmax', kind='wrong', check='rows_sum_to_one', learner='generic', verdict='named',
         idea='loop starts at index 1 (first score skipped)',
         expect=['scores_skipped'], phrase='the running sum misses some scores',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(1, scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O07', exercise='online_softmax', kind='wrong', check='rows_sum_to_one', learner='generic', verdict='named',
         idea='loop stops one early (last score skipped)',
         expect=['scores_skipped'], phrase='the running sum misses some scores',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1] - 1):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O08', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea='m and l not unsqueezed for broadcasting',
         expect=['broadcast'], phrase='shapes do not line up',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m) / l
'''),
    dict(id='O09', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea='iterates over the first dimension instead of the last',
         expect=['broadcast'], phrase='shapes do not line up',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O10', exercise='online_softmax', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='forgot to update m (m stays -inf)',
         expect=['all_nan', 'max_not_updated'], phrase='the maximum subtracted at the end is still -inf',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O11', exercise='online_softmax', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='running max created in float64 (dtype promotion)',
         expect=['dtype'], phrase='Did you create a tensor without dtype=x.dtype?',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=torch.float64, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O12', exercise='online_softmax', kind='wrong', check='values', learner='named', verdict='named',
         idea='guard used for the new term but not for the rescale factor',
         expect=['masked_prefix_nan'], phrase='scores of -inf at the start of a row give NaN',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - m_new) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O13', exercise='online_softmax', kind='wrong', check='one_pass', learner='named', verdict='named',
         idea='two passes: whole-row max first, then a streaming sum',
         expect=['whole_row'], phrase='it read a whole row at once',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = scores.amax(-1)
    l = torch.zeros_like(m)
    for j in range(scores.shape[-1]):
        l = l + torch.exp(scores[..., j] - m)
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O14', exercise='online_softmax', kind='wrong', check='one_pass', learner='named', verdict='named',
         idea='just torch.softmax',
         expect=['whole_row'], phrase='it read a whole row at once',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    return torch.softmax(scores, dim=-1)
'''),
    dict(id='O15', exercise='online_softmax', kind='wrong', check='one_pass', learner='named', verdict='named',
         idea='m from cummax over the row (whole-row op), streamed sum',
         expect=['whole_row'], phrase='it read a whole row at once',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = scores.cummax(-1).values[..., -1]
    l = torch.zeros_like(m)
    for j in range(scores.shape[-1]):
        l = l + torch.exp(scores[..., j] - m)
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O16', exercise='online_softmax', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='Python max() on tensors',
         expect=['python_max'], phrase="Python's max() on tensors",
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"))
    l = torch.zeros(scores.shape[:-1])
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = max(m, x)
        safe = torch.where(m_new == float("-inf"), 0.0, m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O17', exercise='online_softmax', kind='wrong', check='values', learner='named', verdict='named',
         idea='final formula divides exp(scores) by l, without subtracting m',
         expect=['no_max_subtracted'], phrase='exp of the raw scores, no maximum subtracted',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores) / (l * torch.exp(m)).unsqueeze(-1)
'''),
    dict(id='O18', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea="in-place: subtracts m from the caller's scores",
         expect=['input_mutation'], phrase='changed its input scores',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    scores -= m.unsqueeze(-1)
    return scores.exp_() / l.unsqueeze(-1)
'''),
    dict(id='O19', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea='-inf replaced by -1e9 instead of the guard, m starts at -1e9',
         expect=['follows_inputs'], phrase='your code mixes devices',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], -1e9)
    l = torch.zeros(scores.shape[:-1])
    for j in range(scores.shape[-1]):
        x = scores[..., j].clamp(min=-1e9)
        m_new = torch.maximum(m, x)
        l = l * torch.exp(m - m_new) + torch.exp(x - m_new)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O20', exercise='online_softmax', kind='wrong', check='output', learner='named', verdict='named',
         idea='logaddexp running log-sum; start tensor made without device=',
         expect=['follows_inputs'], phrase='your code mixes devices',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    lse = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype)
    for j0 in range(0, scores.shape[-1], 3):
        chunk = scores[..., j0:j0 + 3]
        for c in range(chunk.shape[-1]):
            lse = torch.logaddexp(lse, chunk[..., c])
    return torch.exp(scores - lse.unsqueeze(-1))
'''),
    dict(id='O21', exercise='online_softmax', kind='wrong', check='rows_sum_to_one', learner='generic', verdict='named',
         idea='new term measured against the old maximum',
         expect=['term_old_max'], phrase="the new score's term measured against the old maximum",
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        old = torch.where(m == float("-inf"), torch.zeros_like(m), m)
        l = l * torch.exp(m - safe) + torch.exp(x - old)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O22', exercise='online_softmax', kind='wrong', check='rows_sum_to_one', learner='generic', verdict='named',
         idea='groups of 4 scores, slice end off by one (drops one score per group)',
         expect=['scores_skipped'], phrase='the running sum misses some scores',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros_like(m)
    N = scores.shape[-1]
    for j0 in range(0, N, 4):
        g = scores[..., j0:j0 + 3]
        m_new = torch.maximum(m, g.amax(-1))
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(g - safe.unsqueeze(-1)).sum(-1)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O23', exercise='online_softmax', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='returns (probs, m, l) tuple',
         expect=[], phrase='has that shape: return it alone',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1), m, l
'''),
    dict(id='O24', exercise='online_softmax', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='adds an epsilon to l before dividing (habit)',
         expect=['sum_epsilon'], phrase='added to the running sum before dividing',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / (l.unsqueeze(-1) + 1e-6)
'''),
    dict(id='O25', exercise='online_softmax', kind='wrong', check='one_pass', learner='named', verdict='named',
         idea="one 'group' = the whole row (group size N)",
         expect=['whole_row'], phrase='it read a whole row at once',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros_like(m)
    N = scores.shape[-1]
    for j0 in range(0, N, N):
        g = scores[..., j0:j0 + N]
        m_new = torch.maximum(m, g.amax(-1))
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(g - safe.unsqueeze(-1)).sum(-1)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O_c1', exercise='online_softmax', kind='correct', check='one_pass', learner='passes', verdict='passes',
         idea='groups of 3 scores, logaddexp running log-sum',
         expect=[], phrase='',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    lse = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    for j0 in range(0, scores.shape[-1], 3):
        chunk = scores[..., j0:j0 + 3]
        for c in range(chunk.shape[-1]):
            lse = torch.logaddexp(lse, chunk[..., c])
    return torch.exp(scores - lse.unsqueeze(-1))
'''),
    dict(id='O_c2', exercise='online_softmax', kind='correct', check='one_pass', learner='passes', verdict='passes',
         idea='moves the dim to the front, iterates with unbind, keepdim shapes',
         expect=[], phrase='',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    cols = scores.movedim(-1, 0).unbind(0)
    m = torch.full_like(cols[0], float("-inf")).unsqueeze(-1)
    l = torch.zeros_like(m)
    for x in cols:
        x = x.unsqueeze(-1)
        m_new = torch.maximum(m, x)
        base = m_new.nan_to_num(neginf=0.0)
        l = l * (m - base).exp() + (x - base).exp()
        m = m_new
    return (scores - m).exp() / l
'''),
    dict(id='O_c3', exercise='online_softmax', kind='correct', check='one_pass', learner='passes', verdict='passes',
         idea='l starts at 1 (harmless: the first exp(-inf - m) wipes it)',
         expect=[], phrase='',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.ones(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='O_ok', exercise='online_softmax', kind='correct', check='one_pass', learner='passes', verdict='passes',
         idea='plain solution (baseline): correct',
         expect=[], phrase='',
         code='''
def online_softmax(scores):
    """Softmax over the last dim with one streaming pass for the maximum and the sum."""
    m = torch.full(scores.shape[:-1], float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(scores.shape[:-1], dtype=scores.dtype, device=scores.device)
    for j in range(scores.shape[-1]):
        x = scores[..., j]
        m_new = torch.maximum(m, x)
        safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        l = l * torch.exp(m - safe) + torch.exp(x - safe)
        m = m_new
    return torch.exp(scores - m.unsqueeze(-1)) / l.unsqueeze(-1)
'''),
    dict(id='T01', exercise='tiled_attention', kind='wrong', check='values', learner='named', verdict='named',
         idea='no 1/sqrt(head_size) scaling',
         expect=['missing_scale'], phrase='no scale',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = 1.0
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T03', exercise='tiled_attention', kind='wrong', check='causal', learner='named', verdict='named',
         idea='diagonal tile not masked',
         expect=['future_in_diagonal_tile'], phrase='tiles that let the future in',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                pass
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T04', exercise='tiled_attention', kind='wrong', check='causal', learner='named', verdict='named',
         idea='visits every key tile (future ones only masked, not skipped)',
         expect=['future_tiles_visited'], phrase='read the key tiles after them',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, T, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T05', exercise='tiled_attention', kind='wrong', check='output', learner='misleading', verdict='named',
         idea='query loop stops early: last (partial) tile never computed',
         expect=['unwritten', 'last_tile_dropped'], phrase=['never written', 'last, shorter tile left out'],
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T - tile_size, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T06', exercise='tiled_attention', kind='wrong', check='values', learner='named', verdict='named',
         idea='running output not rescaled by alpha',
         expect=['output_not_rescaled'], phrase='the running output not rescaled when the maximum changes',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T07', exercise='tiled_attention', kind='wrong', check='values', learner='named', verdict='named',
         idea='running sum not rescaled by alpha',
         expect=['sum_not_rescaled'], phrase='the running sum not rescaled when the maximum changes',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T08', exercise='tiled_attention', kind='wrong', check='values', learner='named', verdict='named',
         idea='forgot to divide by l at the end',
         expect=['not_normalised'], phrase='the output never divided by the running sum',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc
    return out
'''),
    dict(id='T09', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='m starts at 0',
         expect=['max_started_at_zero'], phrase='the running maximum started at 0',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), 0.0, dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T10', exercise='tiled_attention', kind='wrong', check='causal', learner='generic', verdict='named',
         idea="tile's own max instead of the running max",
         expect=['maximum_decreases'], phrase='the running maximum must never go down',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = s.amax(-1, keepdim=True)
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T11', exercise='tiled_attention', kind='wrong', check='output', learner='generic', verdict='named',
         idea='skips the diagonal tile too (j0 < i0)',
         expect=['diagonal_tile_skipped'], phrase='the diagonal key tile skipped',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i0, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T12', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='mask hides the diagonal (>= instead of >)',
         expect=['diagonal_hidden'], phrase='the causal mask hides the diagonal too (>= for >)',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj >= qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T13', exercise='tiled_attention', kind='wrong', check='values', learner='generic', verdict='named',
         idea='scaled by tile_size instead of head_size',
         expect=['scale_by_tile_size'], phrase='scores scaled by tile_size ** -0.5',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = tile_size ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T14', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='output created without dtype/device (float32 on cpu)',
         expect=['follows_inputs'], phrase='Did you create a tensor without dtype=x.dtype?',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.zeros(q.shape)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T15', exercise='tiled_attention', kind='wrong', check='memory', learner='named', verdict='named',
         idea='one query tile against all T keys at once (a strip), then sliced',
         expect=['tile_strip'], phrase='a strip of one tile against all',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        strip = qt @ k.mT * scale
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = strip[..., j0:j1]
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T16', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='key tile end not clamped (fine by slicing, but mask arange too long)',
         expect=['broadcast'], phrase='shapes do not line up',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = j0 + tile_size
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T17', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='full (T,T) scores computed, then processed tile by tile',
         expect=['follows_inputs', 'full_matrix', 'future_tiles_visited'], phrase='your code mixes devices',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    full = q @ k.mT * D ** -0.5
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    full = full.masked_fill(future, float("-inf"))
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        w = torch.softmax(full[:, :, i0:i0 + tile_size], dim=-1)
        out[:, :, i0:i0 + tile_size] = w @ v
    return out
'''),
    dict(id='T18', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='F.scaled_dot_product_attention per query tile',
         expect=['follows_inputs', 'fused_kernel'], phrase='your code mixes devices',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    outs = []
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qi = torch.arange(i0, i1).view(-1, 1)
        kj = torch.arange(i1).view(1, -1)
        outs.append(F.scaled_dot_product_attention(q[:, :, i0:i1], k[:, :, :i1], v[:, :, :i1], attn_mask=kj <= qi))
    return torch.cat(outs, dim=2)
'''),
    dict(id='T19', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='mask built with arange on the default device',
         expect=['follows_inputs'], phrase='your code mixes devices',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1).view(-1, 1)
                kj = torch.arange(j0, j1).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T20', exercise='tiled_attention', kind='wrong', check='values', learner='named', verdict='named',
         idea='tile-local causal mask applied to every visited tile',
         expect=['tile_local_mask'], phrase='the mask built from positions inside the tile',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            qi = torch.arange(i1 - i0, device=q.device).view(-1, 1)
            kj = torch.arange(j1 - j0, device=q.device).view(1, -1)
            s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T21', exercise='tiled_attention', kind='wrong', check='causal', learner='named', verdict='named',
         idea='key loop bound off by one (visits the next tile when i1 is a tile boundary)',
         expect=['future_tiles_visited'], phrase='read the key tiles after them',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1 + 1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T22', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='forgot the return statement',
         expect=[], phrase='Did you forget the `return`?',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
'''),
    dict(id='T23', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='query tile end not clamped to T (mask/shape for the short last tile)',
         expect=['broadcast'], phrase='shapes do not line up',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = i0 + tile_size
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T24', exercise='tiled_attention', kind='wrong', check='output', learner='named', verdict='named',
         idea='output buffer in half precision to save memory',
         expect=['dtype'], phrase='Did you create a tensor without dtype=x.dtype?',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q, dtype=torch.float16)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T_c1', exercise='tiled_attention', kind='correct', check='memory', learner='passes', verdict='passes',
         idea='while-loops, additive -inf bias, output list concatenated',
         expect=[], phrase='',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    chunks, i0 = [], 0
    while i0 < T:
        qt = q[:, :, i0:i0 + tile_size] / D ** 0.5
        n = qt.shape[2]
        m = qt.new_full((B, H, n, 1), float("-inf"))
        l = qt.new_zeros((B, H, n, 1))
        acc = qt.new_zeros((B, H, n, D))
        j0 = 0
        while j0 <= i0 + n - 1:
            kt, vt = k[:, :, j0:j0 + tile_size], v[:, :, j0:j0 + tile_size]
            s = qt @ kt.transpose(-2, -1)
            rows = torch.arange(i0, i0 + n, device=q.device)[:, None]
            cols = torch.arange(j0, j0 + kt.shape[2], device=q.device)[None, :]
            s = s + torch.zeros_like(s).masked_fill(cols > rows, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            a, p = (m - m_new).exp(), (s - m_new).exp()
            l, acc, m = l * a + p.sum(-1, keepdim=True), acc * a + p @ vt, m_new
            j0 += tile_size
        chunks.append(acc / l)
        i0 += tile_size
    return torch.cat(chunks, dim=2)
'''),
    dict(id='T_c2', exercise='tiled_attention', kind='correct', check='memory', learner='passes', verdict='passes',
         idea='diagonal mask in tile-local positions (equivalent: the diagonal tile has j0 == i0)',
         expect=[], phrase='',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i1 - i0, device=q.device).view(-1, 1)
                kj = torch.arange(j1 - j0, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T_c3', exercise='tiled_attention', kind='correct', check='memory', learner='passes', verdict='passes',
         idea='key tiles visited backwards, from the diagonal to tile 0',
         expect=[], phrase='',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in reversed(range(0, i1, tile_size)):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
    dict(id='T_ok', exercise='tiled_attention', kind='correct', check='memory', learner='passes', verdict='passes',
         idea='plain solution (baseline): correct',
         expect=[], phrase='',
         code='''
def tiled_attention(q, k, v, tile_size):
    """Causal attention computed tile by tile, never forming the (T, T) scores."""
    B, H, T, D = q.shape
    scale = D ** -0.5
    out = torch.empty_like(q)
    for i0 in range(0, T, tile_size):
        i1 = min(i0 + tile_size, T)
        qt = q[:, :, i0:i1]
        m = torch.full((B, H, i1 - i0, 1), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros((B, H, i1 - i0, 1), dtype=q.dtype, device=q.device)
        acc = torch.zeros((B, H, i1 - i0, D), dtype=q.dtype, device=q.device)
        for j0 in range(0, i1, tile_size):
            j1 = min(j0 + tile_size, T)
            s = qt @ k[:, :, j0:j1].mT * scale
            if j1 > i0:
                qi = torch.arange(i0, i1, device=q.device).view(-1, 1)
                kj = torch.arange(j0, j1, device=q.device).view(1, -1)
                s = s.masked_fill(kj > qi, float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new)
            l = l * alpha + p.sum(-1, keepdim=True)
            acc = acc * alpha + p @ v[:, :, j0:j1]
            m = m_new
        out[:, :, i0:i1] = acc / l
    return out
'''),
]
