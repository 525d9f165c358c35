"""`handoffd demo`: live swarms of scripted agents in a throwaway folder, each ending with a
checked summary.
"""
