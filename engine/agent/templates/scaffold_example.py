from sklearn.linear_model import LogisticRegression


def features(X):
    # the flattened pixels
    return X.reshape(len(X), -1)


def train(X, y, skin_tone):
    # a logistic regression on features(X), classes weighted by their frequency
    model = LogisticRegression(max_iter=1000, class_weight="balanced")
    model.fit(features(X), y)
    return model
