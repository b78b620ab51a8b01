import sys

from hiera.cli import main

sys.exit(main())
