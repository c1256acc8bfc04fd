from rl_system.cli import run

run()
