from rl_system.cli.main import run

run()
