"""``python -m robustbench_dgsa`` = ``dgsa-bench``."""
from .cli import main

main()
