"""levels"""
