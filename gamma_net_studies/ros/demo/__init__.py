"""`gamma-net demo`: the arm pipeline on real nodes (:mod:`.arm`) with the Horde learned live
beside it (:mod:`.horde`). The demo starts nodes as a user would; it is not a node itself.
"""
