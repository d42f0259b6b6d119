from ray_mcp.cli import main

main()
