from cockpit.cli.script import main

raise SystemExit(main())
