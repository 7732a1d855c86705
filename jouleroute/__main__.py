import sys

from jouleroute.cli import main

sys.exit(main())
