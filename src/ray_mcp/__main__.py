from ray_mcp.cli import main

if __name__ == "__main__":  # not when a worker process (anyio.to_process) loads this module as __mp_main__
    main()
