"""faces"""
