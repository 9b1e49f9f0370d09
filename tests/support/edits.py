"""Edits of a solution cell's source, for building wrong submissions from the solutions
(synthetic.answered(..., edit=...))."""


def replace_body(code):
    """An edit that replaces the body of the cell's last function (forward, for a class;
    its docstring kept) with code, written with four spaces of indentation."""
    def edit(source):
        lines = source.splitlines()
        defs = [i for i, line in enumerate(lines) if line.lstrip().startswith("def ")]
        at = next((i for i in defs if "def forward(" in lines[i]), defs[-1])
        indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())] + "    "
        keep = at + 1 + (lines[at + 1].strip().startswith('"""') if at + 1 < len(lines) else 0)
        body = [indent + line[4:] if line else line for line in code.strip("\n").splitlines()]
        return "\n".join(lines[:keep] + body) + "\n"
    return edit
