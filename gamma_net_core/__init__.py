"""gamma_net_core: Γ-nets, value estimators generalized over timescale.

The learner library of gamma_net_ros. It imports nothing from ROS (numpy, numba and
torch only), so researchers can `pip install` it alone and run the paper's studies.
"""

__version__ = "0.1.0"
