"""Exact checker of 4x4 sudoku: the givens must have exactly one completion, the contract's answer.

Contract: {"grid": 4x4 list of 0..4 (0 = blank), "answer": 4x4 list of 1..4}. Every row, column and 2x2 box
holds 1..4 once. A response is a 4x4 list.
"""

N = 4
UNITS = (
    [[(r, c) for c in range(N)] for r in range(N)]
    + [[(r, c) for r in range(N)] for c in range(N)]
    + [[(br + r, bc + c) for r in range(2) for c in range(2)] for br in (0, 2) for bc in (0, 2)]
)


def _is_grid(g, lo):
    return (
        isinstance(g, list) and len(g) == N
        and all(isinstance(row, list) and len(row) == N for row in g)
        and all(type(v) is int and lo <= v <= N for row in g for v in row)
    )  # fmt: skip


def _complete_ok(g):
    return all(sorted(g[r][c] for r, c in unit) == [1, 2, 3, 4] for unit in UNITS)


def solutions(grid, limit=2):
    g = [row[:] for row in grid]
    found = []

    def search():
        if len(found) >= limit:
            return
        blank = next(((r, c) for r in range(N) for c in range(N) if g[r][c] == 0), None)
        if blank is None:
            found.append([row[:] for row in g])
            return
        r, c = blank
        for v in range(1, N + 1):
            if all(g[rr][cc] != v for unit in UNITS if (r, c) in unit for rr, cc in unit):
                g[r][c] = v
                search()
                g[r][c] = 0

    search()
    return found


def validate(contract):
    if not isinstance(contract, dict) or set(contract) != {"grid", "answer"}:
        return ['the contract has exactly "grid" and "answer"']
    grid, answer = contract["grid"], contract["answer"]
    if not _is_grid(grid, 0) or not _is_grid(answer, 1):
        return ["grid must be 4x4 of 0..4 and answer 4x4 of 1..4"]
    if not _complete_ok(answer):
        return ["the answer breaks a row, column or box"]
    if any(grid[r][c] not in (0, answer[r][c]) for r in range(N) for c in range(N)):
        return ["the answer disagrees with a given"]
    if sum(v == 0 for row in grid for v in row) < 4:
        return ["leave at least four blanks"]
    found = solutions(grid)
    if len(found) != 1:
        return ["the givens allow more than one completion"]
    return []


def check(contract, response):
    return _is_grid(response, 1) and response == contract["answer"]
