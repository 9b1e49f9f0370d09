"""The course's exercises, by key, notebook by notebook: the one list of
them. grader.check_<key> is each one's check; grader/checks/exercises.py defines an
Exercise for every key here and for no other. Torch-free, so that grader/__init__.py,
the instructor's tools and the grading kernel's stub read it without importing torch."""

EXERCISE_KEYS = (
    "bag_of_words_loop", "bag_of_words_matmul", "running_average_weights",   # 01, 02
    "masked_softmax", "causal_weights",                         # 03
    "head",                                                     # 04
    "scaled_dot_product_attention",                             # 05
    "multi_head_attention", "batched_multi_head_attention",     # 06
    "block", "gpt", "generate",                                 # 07
    "online_softmax", "tiled_attention", "cached_attention",    # 08
)
