from recallpack.cli import main

raise SystemExit(main())
