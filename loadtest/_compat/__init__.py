"""_compat"""
