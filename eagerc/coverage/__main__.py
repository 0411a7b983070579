import sys

from eagerc.coverage.coverage_command import main

sys.exit(main())
