from workqueue.cli.main import main

main()
